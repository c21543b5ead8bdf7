/* Leaseline runs browser: client-side filters, mirrored in the URL query. */
"use strict";
(function(){
  const sels=[...document.querySelectorAll('.filters select')], q=document.getElementById('filter-text');
  const rows=[...document.querySelectorAll('tbody tr')], count=document.getElementById('shown');
  function apply(){
    let n=0; const text=q.value.toLowerCase();
    for(const r of rows){
      let ok=sels.every(s=>!s.value||(' '+r.dataset[s.dataset.field]+' ').includes(' '+s.value+' '));
      if(ok&&text) ok=r.textContent.toLowerCase().includes(text);
      r.style.display=ok?'':'none'; if(ok) n++;
    }
    count.textContent=n;
    const p=new URLSearchParams(); sels.forEach(s=>{if(s.value)p.set(s.dataset.field,s.value)});
    if(text)p.set('q',text); history.replaceState(null,'',p.toString()?'?'+p:location.pathname);
  }
  sels.forEach(s=>s.addEventListener('change',apply)); q.addEventListener('input',apply);
  const p=new URLSearchParams(location.search);
  sels.forEach(s=>{const v=p.get(s.dataset.field); if(v) s.value=v}); if(p.get('q')) q.value=p.get('q');
  apply(); document.body.dataset.ready='1';
})();
