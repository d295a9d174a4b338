#!/bin/bash
set -e
printf 'Hello, Proctor!\n' > /app/hello.txt
mkdir -p /usr/local/bin
cat > /usr/local/bin/greet <<'SH'
#!/bin/sh
cat /app/hello.txt
whoami
SH
chmod 755 /usr/local/bin/greet
