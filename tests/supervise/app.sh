#!/bin/sh
# The application of the README's "FROM scratch" recipe (/gateway --config-dir
# /config), as tests/supervise runs it under kreflect. It appends what it sees
# to CONFIG_DIR.log, one line each (EPOCH: seconds since the epoch):
#   start PID EPOCH NAME=CONTENT...   every file in the config dir when it starts
#   orphan PID                        a grandchild it leaves behind to be reaped
#   hup EPOCH NAME=CONTENT...         on SIGHUP, the files it then reads
#   usr1 EPOCH / int EPOCH / term EPOCH
# --mode run (default: exit 0 on SIGTERM) | ignore-term | exit3 | kill9
dir= mode=run
while [ $# -gt 0 ]; do
	case $1 in
	--config-dir) dir=$2; shift ;;
	--mode) mode=$2; shift ;;
	esac
	shift
done
log=$dir.log
now() { date +%s.%N; }
files() {
	for f in "$dir"/*; do
		[ -f "$f" ] && printf ' %s=%s' "${f##*/}" "$(cat "$f")"
	done
}
# The traps first: a test that sees the start line may signal at once.
trap 'echo "hup $(now)$(files)" >>"$log"' HUP
trap 'echo "usr1 $(now)" >>"$log"' USR1
trap 'echo "int $(now)" >>"$log"; exit 0' INT
if [ "$mode" = ignore-term ]; then
	trap 'echo "term $(now)" >>"$log"' TERM
else
	trap 'echo "term $(now)" >>"$log"; exit 0' TERM
fi
echo "start $$ $(now)$(files)" >>"$log"
# A double fork: the sleep's parent exits at once, so PID 1 inherits it.
(sleep 0.3 & echo "orphan $!" >>"$log")
case $mode in
exit3) sleep 0.5; exit 3 ;;
kill9) sleep 0.5; kill -9 $$ ;;
esac
i=0
while [ $i -lt 600 ]; do     # a minute at most, whatever happens to the test
	sleep 0.1
	i=$((i + 1))
done
echo "timeout $(now)" >>"$log"
exit 9
