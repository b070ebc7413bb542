#!/bin/sh
# A stand-in for the device's application in the notification tests: it
# writes its pid to PIDFILE and, on each SIGHUP, appends one line to LOG:
#
#   HUP <time> <the content of FILE, newlines as spaces, or "<missing>">
#
#   sh app.sh PIDFILE LOG FILE
pidfile=$1 log=$2 file=$3
reload() {
	content=$(tr '\n' ' ' <"$file" 2>/dev/null) || content="<missing>"
	printf 'HUP %s %s\n' "$(date +%s.%N)" "$content" >>"$log"
}
trap reload HUP
trap 'exit 0' TERM
echo $$ >"$pidfile.tmp" && mv "$pidfile.tmp" "$pidfile"
# wait returns as soon as a trapped signal arrives, so the trap runs at once.
while :; do
	sleep 5 &
	wait $!
done
