# Helpers the benchmark scripts share; sourced (`. bench/lib.sh`) from the repository's root.

# Exits with status 2 and a message unless every NAME=VALUE is a positive integer.
positive() { # NAME=VALUE...
  local a
  for a in "$@"; do
    [[ ${a#*=} =~ ^[1-9][0-9]*$ ]] || { echo "bad ${a%%=*} '${a#*=}': expected a positive integer" >&2; exit 2; }
  done
}

# Installs Debian packages that are missing (names may repeat).
install_missing() { # PACKAGE...
  [ $# -gt 0 ] || return 0
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $(printf '%s\n' "$@" | sort -u) >/dev/null
}

# A free TCP port on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits until something listens on 127.0.0.1:PORT (at most SECONDS, default 10); fails early,
# with the log, if the process died.
wait_up() { # name port pid log [seconds]
  local tries=$(( ${5:-10} * 10 ))
  for _ in $(seq "$tries"); do
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { echo "$1 exited before listening on 127.0.0.1:$2:" >&2; tail -n 20 "$4" >&2; return 1; }
    sleep 0.1
  done
  echo "$1: nothing listens on 127.0.0.1:$2 after ${5:-10} s:" >&2; tail -n 20 "$4" >&2; return 1
}
