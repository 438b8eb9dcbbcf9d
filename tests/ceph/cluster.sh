#!/usr/bin/env bash
# A one-node Ceph cluster for stint's RBD tests: one monitor and one OSD from Debian's packages
# (ceph-mon, ceph-osd, ceph-common), on 127.0.0.1 only, on free ports, no systemd, every file
# under DIR. No manager: librbd needs only the monitor and the OSD, and a manager costs CPU on a
# small shared machine.
#
#   tests/ceph/cluster.sh start DIR   # ready when it returns 0: pool "rbd" exists, rbd create works
#   tests/ceph/cluster.sh stop DIR    # stops the OSD, then the monitor, by their PIDs, and waits
#
# `start` writes DIR/ceph.conf (clients: `-c DIR/ceph.conf`, user admin; the keyring is named in
# its [client] section) and DIR/env (CEPH_CONF=..., sourceable). STINT_CEPH_STORE=memstore keeps
# the OSD's data in memory instead of BlueStore on a sparse file (faster to create, but memstore
# is not sparse: every byte written stays in RAM). A daemon that does not come up is an
# infrastructure failure: `start` says so, stops what it started and tries once more.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
conf=$dir/ceph.conf
STORE=${STINT_CEPH_STORE:-bluestore}
# How long a daemon may take to come up on a busy 2-core machine before it counts as failed.
UP_TIMEOUT_S=${STINT_CEPH_UP_TIMEOUT_S:-90}

log() { echo "ceph-cluster: $*" >&2; }

# Every ceph CLI call starts Python (~0.4 s of CPU): callers poll at most once a second. The
# timeout keeps a call to a monitor that is not there from hanging (client_mount_timeout too).
cephcli() { timeout 30 ceph -c "$conf" "$@"; }

free_ports() {
  python3 - <<'PY'
import socket
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

pid_of() { [[ -s $dir/run/$1.pid ]] && cat "$dir/run/$1.pid"; }

# Stop one daemon by the PID it wrote: SIGTERM, wait up to 30 s, then SIGKILL.
stop_daemon() {
  local name=$1 pid
  pid=$(pid_of "$name") || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) ignored SIGTERM for 30 s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  fi
  rm -f "$dir/run/$name.pid"
}

stop_all() {
  # The OSD first: a monitor stopped first leaves it retrying to reach it.
  stop_daemon osd.0
  stop_daemon mon.a
}

write_conf() {
  local fsid=$1 v2=$2 v1=$3
  cat >"$conf" <<CONF
[global]
fsid = $fsid
# The monitor on the free ports picked for this run, both protocols (librbd's clients speak v2,
# older tools v1), on loopback only.
mon_host = [v2:127.0.0.1:$v2,v1:127.0.0.1:$v1]
mon_initial_members = a
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
public_network = 127.0.0.1/32
cluster_network = 127.0.0.1/32
ms_bind_ipv6 = false
# One OSD: pools of one replica, placed per OSD rather than per host, with a fixed PG count (no
# manager runs the autoscaler), and no warning for what is intended.
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
osd_crush_chooseleaf_type = 0
osd_pool_default_pg_autoscale_mode = off
mon_warn_on_pool_no_redundancy = false
auth_allow_insecure_global_id_reclaim = false
# A test disk is often more than 70 % full; health is not the readiness signal anyway.
mon_data_avail_warn = 1
mon_data_avail_crit = 0
# Everything under this directory; \$pid in the admin socket so that two clients (stint and rbd
# bench, say) do not take each other's.
run_dir = $dir/run
pid_file = $dir/run/\$name.pid
admin_socket = $dir/run/\$name.\$pid.asok
log_file = $dir/log/\$name.log
mon_data = $dir/mon/\$cluster-\$id
osd_data = $dir/osd/\$cluster-\$id
# A client of a dead cluster gets an error, not a hang: 10 s to reach the monitor.
client_mount_timeout = 10
# How long the OSD keeps the watch of a client that stopped pinging it (30 s by default). A
# SIGKILLed stint leaves its watch on the image's header and its exclusive lock; a new stint's
# librbd breaks that lock (blocklisting the dead client) only once the watch is gone, so this
# decides how long the crash test's restarts over RBD wait. Clients ping every 5 s
# (objecter_tick_interval): 10 s still lets a live client miss one ping.
osd_client_watch_timeout = 10
[client]
# Not in [global]: the OSD would read it instead of its own keyring and fail to authenticate.
keyring = $dir/client.admin.keyring
# Caching off for every client (stint, tgt, rbd bench): write-back merging would make the
# comparison one of caches, not of targets.
rbd_cache = false
[osd]
osd_objectstore = $STORE
# BlueStore on a sparse file under DIR, created at mkfs: no block device needed, and only what is
# written takes disk space. 1 GiB of cache target instead of 4: a small, shared machine.
bluestore_block_create = true
bluestore_block_size = $((40 << 30))
bluestore_fsck_on_mount = false
osd_memory_target = $((1 << 30))
# memstore's ceiling, when STINT_CEPH_STORE=memstore.
memstore_device_bytes = $((8 << 30))
# Never give up on the OSD's own heartbeat on a machine another build is loading.
osd_heartbeat_grace = 60
CONF
}

# Wait until `check` succeeds, at most UP_TIMEOUT_S seconds, polling once a second.
wait_for() {
  local what=$1; shift
  local deadline=$((SECONDS + UP_TIMEOUT_S))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "$what did not come up within ${UP_TIMEOUT_S} s"
      return 1
    fi
    sleep 1
  done
}

osd_up() { cephcli osd dump -f json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if any(o["up"] for o in d["osds"]) else 1)'; }

rbd_works() {
  timeout 60 rbd -c "$conf" create --size 4M rbd/stint-ready &&
    timeout 60 rbd -c "$conf" rm --no-progress rbd/stint-ready
}

# One attempt at a cluster; 1 on an infrastructure failure (a daemon that did not come up).
attempt() {
  rm -rf "$dir"/{mon,osd,run,log} "$conf" "$dir"/*.keyring "$dir/monmap" "$dir/env"
  mkdir -p "$dir"/{mon,osd,run,log}
  local fsid ports v2 v1
  fsid=$(cat /proc/sys/kernel/random/uuid)
  ports=$(free_ports)
  v2=${ports% *}
  v1=${ports#* }
  write_conf "$fsid" "$v2" "$v1"

  ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool --create-keyring "$dir/client.admin.keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/client.admin.keyring" >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$v2,v1:127.0.0.1:$v1]" \
    "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/mon.keyring"
  ceph-mon -c "$conf" -i a
  wait_for "the monitor" cephcli mon stat || return 1

  # The OSD: registered with a cephx secret of its own, then made and started.
  local uuid secret id
  uuid=$(cat /proc/sys/kernel/random/uuid)
  secret=$(ceph-authtool --gen-print-key)
  id=$(echo "{\"cephx_secret\": \"$secret\"}" | cephcli osd new "$uuid" -i - -n client.admin)
  [[ $id == 0 ]] || { log "expected OSD id 0, got '$id'"; return 1; }
  mkdir -p "$dir/osd/ceph-0"
  ceph-authtool --create-keyring "$dir/osd/ceph-0/keyring" --name osd.0 --add-key "$secret" >/dev/null
  ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$uuid" >"$dir/log/osd-mkfs.out" 2>&1 ||
    { log "ceph-osd --mkfs failed:"; tail -5 "$dir/log/osd-mkfs.out" >&2; return 1; }
  ceph-osd -c "$conf" -i 0 >>"$dir/log/osd.out" 2>&1
  wait_for "the OSD" osd_up || return 1

  # The pool stint's tests use; 16 PGs spread one OSD's work over its shards.
  cephcli osd pool create rbd 16 16 >/dev/null 2>&1
  timeout 60 rbd -c "$conf" pool init rbd
  wait_for "rbd create in pool rbd" rbd_works || return 1
  echo "CEPH_CONF=$conf" >"$dir/env"
}

case $cmd in
start)
  for c in ceph-mon ceph-osd ceph-authtool monmaptool ceph rbd; do
    command -v "$c" >/dev/null || { log "$c is missing (apt-get install ceph-mon ceph-osd ceph-common)"; exit 3; }
  done
  started=$SECONDS
  if ! attempt; then
    log "infrastructure failure (logs in $dir/log): stopping it and trying once more"
    stop_all
    tail -n 5 "$dir"/log/*.log >&2 2>/dev/null || true
    mv "$dir/log" "$dir/log.failed-attempt" 2>/dev/null || true
    if ! attempt; then
      log "the cluster did not come up twice; giving up (logs in $dir/log)"
      stop_all
      exit 1
    fi
  fi
  log "ready in $((SECONDS - started)) s ($STORE): CEPH_CONF=$conf, pool rbd, user admin"
  ;;
stop)
  stop_all
  log "stopped"
  ;;
*) usage ;;
esac
