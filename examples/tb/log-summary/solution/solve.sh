#!/bin/bash
# Count requests by address (the first field) and 5xx statuses (the ninth:
# the request line in quotes is three fields).
cat > /app/summarize.sh <<'SH'
#!/bin/bash
export LC_ALL=C
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cat > "$log"
cut -d' ' -f1 "$log" | sort | uniq -c | sort -k1,1nr -k2,2 | head -n 3 | sed 's/^ *//'
echo "5xx $(cut -d' ' -f9 "$log" | grep -c '^5[0-9][0-9]$')"
SH
chmod 755 /app/summarize.sh
/app/summarize.sh < /app/access.log > /app/summary.txt
