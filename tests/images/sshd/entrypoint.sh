# Fresh host keys per container (never baked into the image), printed for the test's
# known_hosts; then the public key the test passed in LL_AUTHORIZED_KEY; then sshd.
set -e
ssh-keygen -q -A
for f in /etc/ssh/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ecdsa_key.pub /etc/ssh/ssh_host_rsa_key.pub; do
  echo "host-key $(cat "$f")"
done
for home in /root /home/leaseline /home/nosudo; do
  mkdir -p "$home/.ssh"
  printf '%s\n' "${LL_AUTHORIZED_KEY:-}" > "$home/.ssh/authorized_keys"
  chown -R "$(stat -c %U "$home")" "$home/.ssh"
  chmod 700 "$home/.ssh"; chmod 600 "$home/.ssh/authorized_keys"
done
exec /usr/sbin/sshd -D -e
