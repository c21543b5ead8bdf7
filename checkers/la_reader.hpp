// The list-append history.jsonl reader's fast path (checkers/la_compiled.pyx binds it):
// the records of the usual shape straight into columns, no Python object per record.
// It takes exactly what checkers/list_append/history.py's typed reader (_typed_txns)
// takes and stops at the first thing that reader would not take (or might read
// otherwise), returning false; the Python readers then read the file and name any
// problem. Lines of records that are no client operation (faults: process null, absent
// or "nemesis") are kept raw for the Python side to decode.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace llla {

constexpr int64_t NEVER = INT64_MAX;
constexpr int8_t OK = 0, INFO = 1, FAIL = 2;

struct Flat {
  // one row per txn, in invocation order
  std::vector<int64_t> index, invoke_index, process, t_invoke, t_complete;
  std::vector<int8_t> ttype;
  std::vector<int64_t> mop_start{0};  // row r's micro-ops: [mop_start[r], mop_start[r+1])
  // micro-ops in row order; a read's list is elems[off, off+len), len -1: unknown. The
  // reads of a key are mostly prefixes of one list: each is checked against the longest
  // read of its key so far and shares its elements when it is a prefix of it (or extends
  // it), so elems holds each key's list once plus the reads that disagree with it.
  std::vector<int32_t> key;
  std::vector<uint8_t> app;
  std::vector<int64_t> val, roff, rlen;
  std::vector<int64_t> elems;
  std::vector<std::string> keys;    // key id -> key
  std::vector<std::string> others;  // raw lines of the records that are no client op
};

struct Mop {
  int f;  // 0 append, 1 r
  int32_t key;
  int vkind;  // 0 int, 1 list, 2 null
  int64_t v;
  int64_t lo, hi;  // the list's elements in the scratch buffer
};

// A completion read by the second half's reader before any other record of its process
// there: its invocation, if any, is in the first half (read_file pairs them).
struct Orphan {
  int64_t proc, idx, tm;
  int8_t kind;
  int value_kind;
  std::vector<Mop> mops;
  std::vector<int64_t> scratch;
};

class Reader {
 public:
  explicit Reader(Flat &out, bool second_half = false) : o(out), second(second_half) {}
  std::vector<Orphan> orphans;
  std::unordered_map<int64_t, bool> first_invokes;  // second half: process -> first record
                                                    // there was an invocation
  std::unordered_map<int64_t, int64_t> pending;     // process -> row

  bool line(const char *p, const char *e, int64_t pos) {
    s = p;
    end = e;
    while (end > s && (end[-1] == '\n' || end[-1] == '\r')) --end;
    for (const char *c = s; c < end; ++c)
      if (static_cast<unsigned char>(*c) >= 0x80) return false;  // UTF-8: Python decides
    have_proc = proc_null = proc_nemesis = have_index = have_time = false;
    have_type = have_f = false;
    value_kind = 0;  // absent: null, as the typed reader's default
    mops.clear();
    scratch.clear();
    seen_fields = 0;
    ws();
    if (!eat('{')) return false;
    ws();
    if (!eat('}')) {
      for (;;) {
        ws();
        const char *k0;
        size_t kn;
        if (!plain_string(k0, kn)) return false;
        ws();
        if (!eat(':')) return false;
        ws();
        if (!field(k0, kn)) return false;
        ws();
        if (eat(',')) continue;
        if (eat('}')) break;
        return false;
      }
    }
    ws();
    if (s != end) return false;
    if (!have_proc || proc_null || proc_nemesis) {
      o.others.emplace_back(p, e - p);
      return true;
    }
    return client(pos);
  }

  // key id of a key string (adding it): the first half's reader takes the second's keys
  int32_t key_of(const std::string &k) { return key_id(k.data(), k.size()); }

  bool finish() {
    // elems: every key's longest list, then the reads that disagreed with theirs
    std::vector<int64_t> base(canon.size() + 1, 0);
    for (size_t k = 0; k < canon.size(); ++k) base[k + 1] = base[k] + canon[k].size();
    std::vector<int64_t> all;
    all.reserve(base.back() + o.elems.size());
    for (auto &c : canon) {
      all.insert(all.end(), c.begin(), c.end());
      std::vector<int64_t>().swap(c);
    }
    all.insert(all.end(), o.elems.begin(), o.elems.end());
    for (size_t j = 0; j < o.roff.size(); ++j) {
      int64_t &off = o.roff[j];
      off = off < 0 ? base[-1 - off] : off + base.back();
    }
    o.elems.swap(all);
    return true;
  }

 private:
  Flat &o;
  const char *s = nullptr, *end = nullptr;
  bool have_proc, proc_null, proc_nemesis, have_index, have_time, have_type, have_f;
  int64_t proc = 0, idx = 0, tm = 0;
  std::string type_s, f_s;
  int value_kind;  // 0 null or absent, 1 list of micro-ops, 2 object
  unsigned seen_fields;
  std::vector<Mop> mops;
  std::vector<int64_t> scratch;
  bool second;
  // key -> id: open addressing over o.keys (a key is looked up twice per micro-op)
  std::vector<int32_t> slots = std::vector<int32_t>(1024, -1);
  std::vector<uint64_t> key_hash;
  std::vector<std::vector<int64_t>> canon;  // key id -> its longest read so far

  static uint64_t hash(const char *b, size_t m) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < m; ++i) h = (h ^ static_cast<unsigned char>(b[i])) * 1099511628211ULL;
    return h ^ (h >> 29);
  }
  int32_t key_id(const char *b, size_t m) {
    uint64_t h = hash(b, m);
    size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      int32_t id = slots[i];
      if (id < 0) {
        id = static_cast<int32_t>(o.keys.size());
        o.keys.emplace_back(b, m);
        key_hash.push_back(h);
        canon.emplace_back();
        slots[i] = id;
        if (o.keys.size() * 2 > slots.size()) grow();
        return id;
      }
      const std::string &k = o.keys[id];
      if (key_hash[id] == h && k.size() == m && std::memcmp(k.data(), b, m) == 0) return id;
    }
  }
  void grow() {
    slots.assign(slots.size() * 2, -1);
    size_t mask = slots.size() - 1;
    for (size_t id = 0; id < o.keys.size(); ++id) {
      size_t i = key_hash[id] & mask;
      while (slots[i] >= 0) i = (i + 1) & mask;
      slots[i] = static_cast<int32_t>(id);
    }
  }

  void ws() {
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) ++s;
  }
  bool eat(char c) {
    if (s < end && *s == c) {
      ++s;
      return true;
    }
    return false;
  }
  // a string without escapes or control characters
  bool plain_string(const char *&b, size_t &n) {
    if (!eat('"')) return false;
    b = s;
    while (s < end && *s != '"') {
      if (*s == '\\' || static_cast<unsigned char>(*s) < 0x20) return false;
      ++s;
    }
    if (s >= end) return false;
    n = s - b;
    ++s;
    return true;
  }
  // a JSON integer within int64 (no fraction, exponent or leading zero)
  bool integer(int64_t &v) {
    const char *b = s;
    bool neg = eat('-');
    if (s >= end || *s < '0' || *s > '9') return false;
    if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9') return false;
    uint64_t acc = 0;
    while (s < end && *s >= '0' && *s <= '9') {
      unsigned d = *s - '0';
      if (acc > (UINT64_MAX - d) / 10) return false;
      acc = acc * 10 + d;
      ++s;
    }
    if (s < end && (*s == '.' || *s == 'e' || *s == 'E')) return false;
    if (neg) {
      if (acc > static_cast<uint64_t>(INT64_MAX) + 1) return false;
      v = acc == static_cast<uint64_t>(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(acc);
    } else {
      if (acc > static_cast<uint64_t>(INT64_MAX)) return false;
      v = static_cast<int64_t>(acc);
    }
    (void)b;
    return true;
  }
  bool literal(const char *w) {
    size_t n = std::strlen(w);
    if (static_cast<size_t>(end - s) < n || std::memcmp(s, w, n) != 0) return false;
    s += n;
    return true;
  }
  bool skip_string() {
    if (!eat('"')) return false;
    while (s < end && *s != '"') {
      if (static_cast<unsigned char>(*s) < 0x20) return false;
      if (*s == '\\') {
        ++s;
        if (s >= end) return false;
        if (*s == 'u') {
          for (int i = 0; i < 4; ++i) {
            ++s;
            if (s >= end || !std::isxdigit(static_cast<unsigned char>(*s))) return false;
          }
        } else if (!std::strchr("\"\\/bfnrt", *s)) {
          return false;
        }
      }
      ++s;
    }
    if (s >= end) return false;
    ++s;
    return true;
  }
  bool skip_number() {
    const char *b = s;
    eat('-');
    if (s >= end || *s < '0' || *s > '9') return false;
    if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9') return false;
    while (s < end && *s >= '0' && *s <= '9') ++s;
    if (eat('.')) {
      if (s >= end || *s < '0' || *s > '9') return false;
      while (s < end && *s >= '0' && *s <= '9') ++s;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
      ++s;
      if (s < end && (*s == '+' || *s == '-')) ++s;
      if (s >= end || *s < '0' || *s > '9') return false;
      while (s < end && *s >= '0' && *s <= '9') ++s;
    }
    return s > b;
  }
  bool skip_value(int depth = 0) {
    if (depth > 64 || s >= end) return false;
    char c = *s;
    if (c == '"') return skip_string();
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++s;
      ws();
      if (eat(close)) return true;
      for (;;) {
        ws();
        if (c == '{') {
          if (!skip_string()) return false;
          ws();
          if (!eat(':')) return false;
          ws();
        }
        if (!skip_value(depth + 1)) return false;
        ws();
        if (eat(',')) continue;
        return eat(close);
      }
    }
    if (c == 't') return literal("true");
    if (c == 'f') return literal("false");
    if (c == 'n') return literal("null");
    return skip_number();
  }

  bool field(const char *k, size_t n) {
    auto is = [&](const char *w) { return n == std::strlen(w) && std::memcmp(k, w, n) == 0; };
    unsigned bit;
    if (is("process")) bit = 1;
    else if (is("type")) bit = 2;
    else if (is("f")) bit = 4;
    else if (is("index")) bit = 8;
    else if (is("time")) bit = 16;
    else if (is("value")) bit = 32;
    else return skip_value();
    if (seen_fields & bit) return false;  // a field twice: Python decides
    seen_fields |= bit;
    const char *b;
    size_t m;
    switch (bit) {
      case 1:
        have_proc = true;
        if (literal("null")) {
          proc_null = true;
          return true;
        }
        if (s < end && *s == '"') {
          if (!plain_string(b, m)) return false;
          if (m == 7 && std::memcmp(b, "nemesis", 7) == 0) {
            proc_nemesis = true;
            return true;
          }
          return false;  // a client with a named process: Python decides
        }
        return integer(proc);
      case 2:
        if (!plain_string(b, m)) return false;
        type_s.assign(b, m);
        have_type = true;
        return true;
      case 4:
        if (!plain_string(b, m)) return false;
        f_s.assign(b, m);
        have_f = true;
        return true;
      case 8:
        if (literal("null")) return true;
        have_index = true;
        return integer(idx);
      case 16:
        if (literal("null")) return true;
        have_time = true;
        return integer(tm);
      default:
        return value();
    }
  }

  // value: null, an object (kept aside), or a list of [f, key, int | [int...] | null]
  bool value() {
    if (literal("null")) {
      value_kind = 0;
      return true;
    }
    if (s < end && *s == '{') {
      value_kind = 2;
      return skip_value();
    }
    if (!eat('[')) return false;
    value_kind = 1;
    ws();
    if (eat(']')) return true;
    for (;;) {
      ws();
      if (!eat('[')) return false;
      ws();
      const char *b;
      size_t m;
      Mop mop{};
      if (!plain_string(b, m)) return false;
      if (m == 6 && std::memcmp(b, "append", 6) == 0) mop.f = 0;
      else if (m == 1 && b[0] == 'r') mop.f = 1;
      else return false;
      ws();
      if (!eat(',')) return false;
      ws();
      if (!plain_string(b, m)) return false;
      mop.key = key_id(b, m);
      ws();
      if (!eat(',')) return false;
      ws();
      if (literal("null")) {
        mop.vkind = 2;
      } else if (eat('[')) {
        mop.vkind = 1;
        mop.lo = scratch.size();
        ws();
        if (!eat(']')) {
          for (;;) {
            ws();
            int64_t x;
            if (!integer(x)) return false;
            scratch.push_back(x);
            ws();
            if (eat(',')) continue;
            if (eat(']')) break;
            return false;
          }
        }
        mop.hi = scratch.size();
      } else {
        mop.vkind = 0;
        if (!integer(mop.v)) return false;
      }
      ws();
      if (!eat(']')) return false;
      // what _typed_mops takes: appends of an int above INT64_MIN, reads of a list or null
      if (mop.f == 0 && (mop.vkind != 0 || mop.v == INT64_MIN)) return false;
      if (mop.f == 1 && mop.vkind == 0) return false;
      mops.push_back(mop);
      ws();
      if (eat(',')) continue;
      if (eat(']')) return true;
      return false;
    }
  }

  bool client(int64_t pos) {
    (void)pos;
    if (!have_f || f_s != "txn" || !have_index || !have_time) return false;
    bool is_invoke = have_type && type_s == "invoke";
    bool is_ok = have_type && type_s == "ok";
    if (value_kind != 1 && (value_kind != 0 || is_invoke || is_ok)) return false;
    bool first_here = false;
    if (second) first_here = first_invokes.emplace(proc, is_invoke).second;
    if (is_invoke) {
      if (pending.count(proc)) return false;
      int64_t row = o.index.size();
      pending[proc] = row;
      o.index.push_back(idx);
      o.invoke_index.push_back(idx);
      o.ttype.push_back(INFO);
      o.process.push_back(proc);
      o.t_invoke.push_back(tm);
      o.t_complete.push_back(NEVER);
      for (const Mop &m : mops) {
        o.key.push_back(m.key);
        o.app.push_back(m.f == 0);
        o.val.push_back(m.f == 0 ? m.v : 0);
        put_read(m, false, false);
      }
      o.mop_start.push_back(o.key.size());
      return true;
    }
    int8_t kind;
    if (is_ok) kind = OK;
    else if (have_type && type_s == "info") kind = INFO;
    else if (have_type && type_s == "fail") kind = FAIL;
    else return false;
    auto it = pending.find(proc);
    if (it == pending.end()) {
      if (!first_here) return false;
      orphans.push_back(Orphan{proc, idx, tm, kind, value_kind, mops, {}});
      Orphan &orphan = orphans.back();
      for (Mop &m : orphan.mops) {  // its lists, out of the scratch buffer
        if (m.f == 1 && m.vkind == 1) {
          int64_t lo = orphan.scratch.size();
          orphan.scratch.insert(orphan.scratch.end(), scratch.begin() + m.lo,
                                scratch.begin() + m.hi);
          m.hi = lo + (m.hi - m.lo);
          m.lo = lo;
        }
      }
      return true;
    }
    int64_t row = it->second;
    pending.erase(it);
    o.index[row] = idx;
    o.ttype[row] = kind;
    if (kind == OK) o.t_complete[row] = tm;
    int64_t a = o.mop_start[row], b = o.mop_start[row + 1];
    if (value_kind == 0) return true;  // the invocation's micro-ops stand
    if (static_cast<int64_t>(mops.size()) != b - a) return false;
    for (int64_t j = a; j < b; ++j) {
      const Mop &m = mops[j - a];
      if (m.key != o.key[j] || (m.f == 0) != static_cast<bool>(o.app[j])) return false;
      if (m.f == 0) {
        if (m.v != o.val[j]) return false;
      } else {
        put_read(m, true, kind == OK, j);
      }
    }
    return true;
  }

  // a read's list: appended (at an invocation) or replacing row j's (at a completion);
  // a null read is unknown (-1), or empty at an ok completion. A list that agrees with
  // its key's longest so far is stored as a prefix of it (off -1 - key until finish()
  // places the keys' lists), any other in elems.
  void put_read(const Mop &m, bool replace, bool completed_ok, int64_t j = -1) {
    int64_t off = 0, len = 0;
    if (m.f == 1) {
      if (m.vkind == 1) {
        len = m.hi - m.lo;
        const int64_t *x = scratch.data() + m.lo;
        std::vector<int64_t> &c = canon[m.key];
        size_t common = std::min<size_t>(len, c.size());
        if (common == 0 || std::memcmp(x, c.data(), common * sizeof(int64_t)) == 0) {
          if (static_cast<size_t>(len) > c.size()) c.insert(c.end(), x + c.size(), x + len);
          off = -1 - static_cast<int64_t>(m.key);
        } else {
          off = o.elems.size();
          o.elems.insert(o.elems.end(), x, x + len);
        }
      } else {
        len = completed_ok ? 0 : -1;
      }
    }
    if (replace) {
      o.roff[j] = off;
      o.rlen[j] = len;
    } else {
      o.roff.push_back(off);
      o.rlen.push_back(len);
    }
  }
};

// Reads lines [begin, end) of the file (begin: a line's start; the last line read is
// the one that starts before end): true when every line took the fast path.
inline bool read_range(const char *path, int64_t begin, int64_t end, Reader &r) {
  FILE *fh = std::fopen(path, "rb");
  if (!fh) return false;
  if (begin > 0 && std::fseek(fh, begin, SEEK_SET) != 0) {
    std::fclose(fh);
    return false;
  }
  char *buf = nullptr;
  size_t cap = 0;
  ssize_t n;
  int64_t pos = 0, at = begin;
  bool ok = true;
  while ((end < 0 || at < end) && (n = getline(&buf, &cap, fh)) != -1) {
    at += n;
    if (!r.line(buf, buf + n, pos++)) {
      ok = false;
      break;
    }
  }
  std::free(buf);
  std::fclose(fh);
  return ok;
}

// Where the second half starts: the first line start at or after the middle (-1: none).
inline int64_t middle_line(const char *path, int64_t size) {
  FILE *fh = std::fopen(path, "rb");
  if (!fh) return -1;
  int64_t at = size / 2;
  int c = EOF;
  if (std::fseek(fh, at - 1, SEEK_SET) == 0) {
    while ((c = std::fgetc(fh)) != EOF && c != '\n') ++at;
  }
  std::fclose(fh);
  return c == '\n' && at < size ? at : -1;
}

template <typename T> void append(std::vector<T> &a, std::vector<T> &b) {
  a.insert(a.end(), b.begin(), b.end());
  std::vector<T>().swap(b);
}

// The second half's columns after the first's: keys renamed to the first's ids, rows and
// micro-ops shifted, completions of first-half invocations applied to their rows. False
// where the file read as a whole would have stopped (a completion without an invocation,
// an invocation while its process's txn is open) or the completion does not fit.
inline bool join_halves(Reader &ra, Flat &a, Reader &rb, Flat &b) {
  std::vector<int32_t> rename(b.keys.size());
  for (size_t k = 0; k < b.keys.size(); ++k) rename[k] = ra.key_of(b.keys[k]);
  for (const auto &p : rb.first_invokes)
    if (p.second && ra.pending.count(p.first)) return false;  // invoked while open
  const int64_t rows = a.index.size(), mops = a.key.size(), elems = a.elems.size();
  for (int64_t &x : b.roff) x += elems;
  for (size_t j = 1; j < b.mop_start.size(); ++j) a.mop_start.push_back(b.mop_start[j] + mops);
  std::vector<int64_t>().swap(b.mop_start);
  for (int32_t k : b.key) a.key.push_back(rename[k]);
  std::vector<int32_t>().swap(b.key);
  append(a.index, b.index);
  append(a.invoke_index, b.invoke_index);
  append(a.process, b.process);
  append(a.t_invoke, b.t_invoke);
  append(a.t_complete, b.t_complete);
  append(a.ttype, b.ttype);
  append(a.app, b.app);
  append(a.val, b.val);
  append(a.roff, b.roff);
  append(a.rlen, b.rlen);
  append(a.elems, b.elems);
  a.others.insert(a.others.end(), b.others.begin(), b.others.end());
  for (const Orphan &c : rb.orphans) {
    auto it = ra.pending.find(c.proc);
    if (it == ra.pending.end()) return false;  // a completion without an invocation
    int64_t row = it->second;
    ra.pending.erase(it);
    a.index[row] = c.idx;
    a.ttype[row] = c.kind;
    if (c.kind == OK) a.t_complete[row] = c.tm;
    int64_t lo = a.mop_start[row], hi = a.mop_start[row + 1];
    if (c.value_kind == 0) continue;  // the invocation's micro-ops stand
    if (static_cast<int64_t>(c.mops.size()) != hi - lo) return false;
    for (int64_t j = lo; j < hi; ++j) {
      const Mop &m = c.mops[j - lo];
      if (rename[m.key] != a.key[j] || (m.f == 0) != static_cast<bool>(a.app[j])) return false;
      if (m.f == 0) {
        if (m.v != a.val[j]) return false;
      } else if (m.vkind == 1) {
        a.roff[j] = a.elems.size();
        a.rlen[j] = m.hi - m.lo;
        a.elems.insert(a.elems.end(), c.scratch.begin() + m.lo, c.scratch.begin() + m.hi);
      } else {
        a.roff[j] = 0;
        a.rlen[j] = c.kind == OK ? 0 : -1;
      }
    }
  }
  return true;
}

constexpr int64_t TWO_HALVES_BYTES = int64_t(1) << 23;  // from 8 MB on, two threads read

// Reads the file: true when every line took the fast path. From halves_from bytes on, the
// second half of the lines is read on a second thread, into columns of its own, then
// joined after the first half's: the same columns as one reader's, key ids aside (the
// caller orders keys by name).
inline bool read_file(const char *path, Flat &out, int64_t halves_from = TWO_HALVES_BYTES) {
  FILE *fh = std::fopen(path, "rb");
  if (!fh) return false;
  std::fseek(fh, 0, SEEK_END);
  int64_t size = std::ftell(fh);
  std::fclose(fh);
  int64_t mid = size >= halves_from && size > 1 ? middle_line(path, size) : -1;
  if (mid < 0) {
    Reader r(out);
    return read_range(path, 0, -1, r) && r.finish();
  }
  Flat second;
  Reader ra(out), rb(second, true);
  bool ok_b = false;
  std::thread other([&] { ok_b = read_range(path, mid, -1, rb) && rb.finish(); });
  bool ok_a = read_range(path, 0, mid, ra) && ra.finish();
  other.join();
  return ok_a && ok_b && join_halves(ra, out, rb, second);
}

}  // namespace llla
