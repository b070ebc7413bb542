# shellcheck shell=sh
# Sourced by the suites of tests/install/: the counters, the result line, and
# the test API server with objects in the namespace the examples mirror.
. tests/result.sh
api_pid=
# The last line, "N passed, N failed"; the exit status says whether all passed.
finish() {
	[ -z "$api_pid" ] || kill "$api_pid" 2>/dev/null
	result
	exit
}
trap 'bad "interrupted"; finish' INT TERM

# start_api DIR: tests/apiserver in DIR (its kubeconfig, CA and token there),
# with a ConfigMap and a Secret in namespace edge and a ConfigMap elsewhere.
start_api() {
	mkdir -p "$1"
	python3 tests/apiserver/apiserver.py --workdir "$1" --ready-file "$1/ready.json" \
		--bookmark-interval 1 >"$1/apiserver.log" 2>&1 &
	api_pid=$!
	api_ready=$1/ready.json
	i=0
	while [ ! -s "$api_ready" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$api_ready" ] || { bad "the test API server did not start: $(tail -3 "$1/apiserver.log")"; finish; }
	ctl create configmaps edge gateway-config mode=edge level=2 -l app=gateway
	ctl create secrets edge gateway-token token=c2VjcmV0 -l app=gateway
	ctl create configmaps default elsewhere x=y
}
ctl() { python3 tests/apiserver/control.py --ready-file "$api_ready" "$@" >/dev/null; }
