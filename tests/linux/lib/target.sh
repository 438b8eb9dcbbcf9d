#!/bin/bash
# Starts and stops one `stint serve` on 127.0.0.1:PORT, always by its recorded PID.
#   lib/target.sh start RUNDIR PORT STINT_ARGS...   start `$STINT STINT_ARGS...`; wait until it
#                                                   listens on 127.0.0.1:PORT; print its PID
#   lib/target.sh stop RUNDIR                       SIGTERM (SIGKILL after 5 s), by recorded PID
#   lib/target.sh kill RUNDIR                       SIGKILL by recorded PID (a simulated crash)
#   lib/target.sh restart RUNDIR                    start again with the recorded port and args
#   lib/target.sh hup RUNDIR                        SIGHUP by recorded PID (re-read --config)
# RUNDIR holds the state (pid, port, args) and target.log (every start appends to it).
# Exit status of start: 0 = listening; 1 = the target exited or did not listen in time (its
# log's tail is printed); 2 = the port was already taken by something else.
set -euo pipefail
cmd=${1:?start|stop|kill|restart|hup}; RUN=${2:?RUNDIR}; shift 2
mkdir -p "$RUN"
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q "127.0.0.1:$1 "; }
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${st#Z}" = "$st" ]; }
start() {
    local port=$1 pid; shift
    : "${STINT:?set STINT to the stint binary}"
    [ -x "$STINT" ] || { echo "STINT=$STINT is not executable" >&2; exit 1; }
    if [ -e "$RUN/pid" ] && alive "$(cat "$RUN/pid")"; then
        echo "a target started here still runs (pid $(cat "$RUN/pid"))" >&2; exit 2
    fi
    listening "$port" && { echo "127.0.0.1:$port already in use" >&2; exit 2; }
    echo "$port" > "$RUN/port"; printf '%s\0' "$@" > "$RUN/args"
    echo "=== $(date +%T.%N) start: $STINT $*" >> "$RUN/target.log"
    "$STINT" "$@" >> "$RUN/target.log" 2>&1 < /dev/null &
    pid=$!
    echo "$pid" > "$RUN/pid"
    for _ in $(seq 300); do listening "$port" && break; alive "$pid" || break; sleep 0.1; done
    if ! listening "$port"; then
        echo "target did not come up (pid $pid):" >&2; tail -20 "$RUN/target.log" >&2
        alive "$pid" && kill -KILL "$pid" 2>/dev/null
        rm -f "$RUN/pid"; exit 1
    fi
    echo "$pid"
}
stop() {
    local sig=$1 pid
    pid=$(cat "$RUN/pid" 2>/dev/null) || { echo "no target recorded in $RUN" >&2; return 0; }
    local cpu; cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15)/hz}' "/proc/$pid/stat" 2>/dev/null || true)
    echo "=== $(date +%T.%N) $sig pid $pid (cpu_s=${cpu:-?})" >> "$RUN/target.log"
    kill -"$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
    rm -f "$RUN/pid"
    echo "target pid $pid stopped ($sig) cpu_s=${cpu:-?}"
}
case "$cmd" in
start)   start "$@" ;;
stop)    stop TERM ;;
kill)    stop KILL ;;
hup)     pid=$(cat "$RUN/pid" 2>/dev/null) || { echo "no target recorded in $RUN" >&2; exit 1; }
         alive "$pid" || { echo "target pid $pid is not running" >&2; exit 1; }
         echo "=== $(date +%T.%N) HUP pid $pid" >> "$RUN/target.log"
         kill -HUP "$pid"; echo "target pid $pid: SIGHUP" ;;
restart) port=$(cat "$RUN/port"); mapfile -d '' args < "$RUN/args"; start "$port" "${args[@]}" ;;
*) echo "usage: $0 start RUNDIR PORT ARGS... | stop RUNDIR | kill RUNDIR | restart RUNDIR | hup RUNDIR" >&2; exit 2 ;;
esac
