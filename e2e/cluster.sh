#!/usr/bin/env bash
# A real single-node Kubernetes, run as plain processes on this machine, for the e2e tests.
#
#   e2e/cluster.sh up [control-plane|node]   start a tier (builds/reuses binaries first)
#   e2e/cluster.sh down                      stop everything, leave no process/mount/interface/iptables rule
#   e2e/cluster.sh status                    what is running
#   e2e/cluster.sh load-images [TAR|IMAGE]...  import image archives / local docker images into the node
#
# Tiers: control-plane = etcd + kube-apiserver + kube-controller-manager (for operator integration tests);
#        node = control-plane + scheduler + containerd (own instance) + kubelet + kube-proxy + CNI bridge
#               + CoreDNS + local-path-provisioner (for end-to-end tests).
# Admin kubeconfig: .data/k8s/kubeconfig. Logs: /var/lib/rocketcluster/k8s/logs/. State: /var/lib/rocketcluster/k8s.
# All addresses are on this machine: loopback, NODE_IP on a port-less bridge made here, and the pod bridge.
#   e2e/cluster.sh tier | kubeconfig | dns NAME   (helpers for the pytest fixtures)
set -euo pipefail
# No `grep -q` at the end of a pipe here: it exits at the first match, the command writing into the pipe
# may then die of SIGPIPE, and under pipefail the whole pipe reads as false (seen: "Address already
# assigned" from an `ip addr add` that a failed check let through). `grep >/dev/null` reads to the end.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source=/dev/null
. "$HERE/versions.env"
CACHE=${ROCKETCLUSTER_CACHE:-$HOME/.cache/rocketcluster}
KBIN=$CACHE/kubernetes-$K8S_VERSION/bin
ETCD_BIN=$CACHE/etcd-$ETCD_VERSION/bin/etcd
COREDNS_BIN=$CACHE/coredns-$COREDNS_VERSION/bin/coredns
LPP_BIN=$CACHE/local-path-provisioner-$LOCAL_PATH_VERSION/bin/local-path-provisioner
PAUSE_BIN=$CACHE/pause-$PAUSE_VERSION/bin/pause

# Everything the running cluster needs lives outside the work tree (other test suites wipe .data/);
# only a copy of the admin kubeconfig goes to .data/k8s/kubeconfig (rewritten by `up` and `kubeconfig`).
STATE=${K8S_STATE:-/var/lib/rocketcluster/k8s}
DATA=$STATE/conf
RUN=/run/rocketcluster-k8s
PKI=$STATE/pki
LOGS=$STATE/logs
PIDS=$STATE/pids
KUBECONFIG_ADMIN=$PKI/admin.kubeconfig
KUBECONFIG_OUT=${K8S_KUBECONFIG:-$REPO/.data/k8s/kubeconfig}

NODE_NAME=rc-node
NODE_IF=rck8s0                 # interface created here (a port-less bridge), holds NODE_IP
NODE_IP=${K8S_NODE_IP:-10.250.0.1}
SERVICE_CIDR=10.96.0.0/16
SERVICE_API_IP=10.96.0.1
POD_CIDR=10.88.0.0/16
POD_BRIDGE=rccni0
ETCD_PORT=23790
ETCD_PEER_PORT=23800
API_PORT=6443
CONTAINERD_SOCK=$RUN/containerd/containerd.sock
PAUSE_IMAGE=rocketcluster.local/pause:$PAUSE_VERSION
HELPER_IMAGE=rocketcluster.local/volume-helper:1
KUBECTL=$KBIN/kubectl

log() { printf '[k8s %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# ---------------------------------------------------------------- processes
start_proc() { # NAME CMD...: start in its own session, pid in $PIDS/NAME.pid, log in $LOGS/NAME.log
  local name=$1; shift
  if is_running "$name"; then log "$name already running"; return 0; fi
  mkdir -p "$PIDS" "$LOGS"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$PIDS/$name.pid"
}
is_running() { [[ -f $PIDS/$1.pid ]] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }
stop_procs() { # NAME...: SIGTERM them together, wait up to 15 s, then SIGKILL what is left
  local name pid t0=$SECONDS pids=()
  for name in "$@"; do
    [[ -f $PIDS/$name.pid ]] || continue
    pid=$(cat "$PIDS/$name.pid")
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$PIDS/$name.pid"
  done
  for ((i = 0; i < 150; i++)); do
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]})) || return 0
    pids=("${alive[@]}")
    sleep 0.1
  done
  log "still running after $((SECONDS - t0))s, SIGKILL: ${pids[*]} ($*)"
  kill -KILL "${pids[@]}" 2>/dev/null || true
}
# PIDs whose command line names our containerd socket (its shims): our own children, found by id.
our_shim_pids() {
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -- "$RUN/containerd" >/dev/null && echo "${p#/proc/}"
  done
  return 0
}
wait_for() { # DESC TIMEOUT CMD...
  local desc=$1 t=$2; shift 2
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || die "timed out after ${t}s waiting for $desc (logs: $LOGS)"
    sleep 0.25
  done
}

# ---------------------------------------------------------------- PKI + kubeconfigs
cert() { # NAME CN O [SAN] : EC P-256 key + cert signed by the cluster CA
  local name=$1 cn=$2 o=$3 san=${4:-}
  [[ -f $PKI/$name.crt ]] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  local subj="/CN=$cn"; [[ -n $o ]] && subj="/O=$o/CN=$cn"
  local ext="$PKI/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n $san ]]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi
  } >"$ext"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}
kubeconfig() { # FILE CERTNAME
  local b64='base64 -w0'
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rocketcluster-e2e
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$PKI/$2.crt")
    client-key-data: $($b64 <"$PKI/$2.key")
contexts:
- name: rocketcluster-e2e
  context: {cluster: rocketcluster-e2e, user: $2}
current-context: rocketcluster-e2e
EOF
  chmod 600 "$1"
}
pki() {
  mkdir -p "$PKI"
  # The PKI names NODE_IP; regenerate everything if that changed.
  if [[ -f $PKI/node-ip && $(cat "$PKI/node-ip") != "$NODE_IP" ]]; then rm -rf "${PKI:?}"/*; fi
  echo "$NODE_IP" >"$PKI/node-ip"
  if [[ ! -f $PKI/ca.crt ]]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=rocketcluster-e2e-ca" -days 3650 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$PKI/ca.crt" 2>/dev/null
  fi
  if [[ ! -f $PKI/sa.key ]]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
    openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  cert apiserver kube-apiserver "" \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_API_IP"
  cert admin admin system:masters
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert controller-manager system:kube-controller-manager ""
  cert scheduler system:kube-scheduler ""
  cert kube-proxy system:kube-proxy ""
  cert kubelet "system:node:$NODE_NAME" system:nodes
  cert kubelet-serving "$NODE_NAME" "" "DNS:$NODE_NAME,IP:$NODE_IP"
  local c
  for c in admin controller-manager scheduler kube-proxy kubelet; do
    [[ -f $PKI/$c.kubeconfig ]] || kubeconfig "$PKI/$c.kubeconfig" "$c"
  done
  publish_kubeconfig
}
publish_kubeconfig() {
  mkdir -p "$(dirname "$KUBECONFIG_OUT")"
  install -m 600 "$PKI/admin.kubeconfig" "$KUBECONFIG_OUT"
}

# ---------------------------------------------------------------- network
node_if_up() {
  # A port-less bridge (the dummy module may not exist on this kernel): only holds NODE_IP.
  ip link show "$NODE_IF" >/dev/null 2>&1 || ip link add "$NODE_IF" type bridge
  ip addr replace "$NODE_IP/32" dev "$NODE_IF"  # adds it, or leaves it as it is
  ip link set "$NODE_IF" up
}

# ---------------------------------------------------------------- control plane
need_bins() {
  local b
  for b in "$@"; do [[ -x $b ]] || return 1; done
}
control_plane_up() {
  need_bins "$ETCD_BIN" "$KBIN/kube-apiserver" "$KBIN/kube-controller-manager" "$KUBECTL" ||
    bash "$HERE/build.sh" control-plane
  mkdir -p "$DATA" "$STATE" "$LOGS" "$PIDS"
  pki
  node_if_up
  start_proc etcd "$ETCD_BIN" --name rc-etcd --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "rc-etcd=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
    --listen-metrics-urls "" --unsafe-no-fsync --log-level warn
  start_proc kube-apiserver "$KBIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --authorization-mode Node,RBAC --allow-privileged=true \
    --enable-admission-plugins NodeRestriction \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --enable-aggregator-routing=true --profiling=false --v=1
  start_proc kube-controller-manager "$KBIN/kube-controller-manager" \
    --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
    --use-service-account-credentials=true --leader-elect=false --controllers '*' \
    --service-cluster-ip-range "$SERVICE_CIDR" --profiling=false --v=1
  wait_for "kube-apiserver /readyz" 60 kc get --raw /readyz
  # The ServiceAccount controller has run once the default account exists: the controllers are up.
  wait_for "controller-manager (default ServiceAccount)" 60 kc -n default get serviceaccount default
}

# ---------------------------------------------------------------- node
write_node_configs() {
  mkdir -p "$DATA/node" "$DATA/node/cni" "$STATE/local-path"
  local d=$DATA/node
  # Pods get a resolv.conf naming only the cluster DNS: nothing is forwarded off this machine.
  : >"$d/resolv.conf"
  cat >"$d/cni/10-rocketcluster.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "rocketcluster", "plugins": [
  {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni-ipam",
            "ranges": [[{"subnet": "${POD_CIDR%/*}/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  cat >"$d/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[debug]
  level = "warn"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  enable_selinux = false
  # Some sandboxes (this VM among them) drop CAP_SYS_RESOURCE even for root, so the negative
  # oom_score_adj the CRI asks for (-998 for sandboxes) would fail in runc: clamp to containerd's own.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
    max_conf_num = 1
EOF
  cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: $d/resolv.conf
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
imageGCHighThresholdPercent: 100
evictionHard: {nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
volumePluginDir: $STATE/kubelet-plugins
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 5s
nodeStatusReportFrequency: 10s
EOF
  cat >"$d/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
nodePortAddresses: ["$NODE_IP/32"]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  cat >"$d/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $PKI/scheduler.kubeconfig}
leaderElection: {leaderElect: false}
EOF
  # CoreDNS runs on the host, answers on NODE_IP:53 for cluster.local only (no forwarding).
  cat >"$d/Corefile" <<EOF
.:53 {
    bind $NODE_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KUBECONFIG_ADMIN
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
    loadbalance
}
EOF
  mkdir -p "$d/local-path"
  cat >"$d/local-path/config.json" <<EOF
{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$STATE/local-path"]}]}
EOF
  cat >"$d/local-path/helperPod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: helper-pod}
spec:
  priorityClassName: system-node-critical
  tolerations: [{key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}]
  containers:
  - name: helper-pod
    image: $HELPER_IMAGE
    imagePullPolicy: Never
EOF
}

node_images() { # pause (sandbox) and volume-helper images, built from host files, no registry
  local have
  have=$(ctr_k8s images ls -q 2>/dev/null || true)
  if ! grep -qx "$PAUSE_IMAGE" <<<"$have"; then
    python3 "$HERE/mkimage.py" --tag "$PAUSE_IMAGE" --entrypoint /pause --user 65535:65535 "$PAUSE_BIN=/pause" |
      ctr_k8s images import - >/dev/null
  fi
  if ! grep -qx "$HELPER_IMAGE" <<<"$have"; then
    local bb=/bin/busybox
    python3 "$HERE/mkimage.py" --tag "$HELPER_IMAGE" "$bb=/bin/busybox" \
      @symlink:busybox=/bin/sh @symlink:busybox=/bin/mkdir @symlink:busybox=/bin/rm @symlink:busybox=/bin/chmod \
      @symlink:busybox=/bin/ls @symlink:busybox=/bin/cat @symlink:busybox=/bin/sleep |
      ctr_k8s images import - >/dev/null
  fi
}
ctr_k8s() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }
start_kubelet() {
  # containerd answers `ctr version` before its CRI service is initialized; a kubelet started in that gap
  # exits at once ("server is not initialized yet"), so start it again until it stays up.
  local end=$((SECONDS + 60))
  while :; do
    start_proc kubelet "$KBIN/kubelet" --config "$DATA/node/kubelet.yaml" \
      --kubeconfig "$PKI/kubelet.kubeconfig" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
      --root-dir "$STATE/kubelet" --v=1
    sleep 2
    is_running kubelet && return 0
    ((SECONDS < end)) || die "the kubelet keeps exiting at start (logs: $LOGS/kubelet.log)"
    log "kubelet exited at start ($(tail -n 1 "$LOGS/kubelet.log" | cut -c1-200)); starting it again"
  done
}

dns_query() { # NAME [SERVER]: print the A records CoreDNS gives for NAME (exit 1 if none)
  python3 - "$1" "${2:-$NODE_IP}" <<'EOF'
import random, socket, struct, sys
name, server = sys.argv[1], sys.argv[2]
qid = random.randrange(65536)
q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.sendto(q, (server, 53))
r = s.recv(4096)
an = struct.unpack(">H", r[6:8])[0]; i = 12 + len(q) - 12
ips = []
for _ in range(an):
    while r[i] and r[i] < 0xC0: i += r[i] + 1
    i += 2 if r[i] >= 0xC0 else 1
    typ, _c, _t, ln = struct.unpack(">HHIH", r[i:i + 10]); i += 10
    if typ == 1: ips.append(socket.inet_ntoa(r[i:i + ln]))
    i += ln
print(" ".join(ips)); sys.exit(0 if ips else 1)
EOF
}

node_up() {
  need_bins "$KBIN/kube-scheduler" "$KBIN/kubelet" "$KBIN/kube-proxy" "$COREDNS_BIN" "$LPP_BIN" "$PAUSE_BIN" ||
    bash "$HERE/build.sh" node
  bash "$HERE/deps.sh" node
  [[ -e /dev/kmsg ]] || ln -s /dev/console /dev/kmsg
  modprobe br_netfilter 2>/dev/null || true
  modprobe overlay 2>/dev/null || true
  sysctl -qw net.ipv4.ip_forward=1
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] && sysctl -qw net.bridge.bridge-nf-call-iptables=1
  # Without systemd, / may be private: the kubelet needs shared propagation for volume mounts.
  [[ $(findmnt -no PROPAGATION /) == *shared* ]] || mount --make-rshared /
  write_node_configs
  mkdir -p "$RUN/containerd"
  start_proc containerd containerd --config "$DATA/node/containerd.toml"
  start_proc kube-scheduler "$KBIN/kube-scheduler" --config "$DATA/node/kube-scheduler.yaml" \
    --bind-address 127.0.0.1 --secure-port 0 --v=1
  start_proc coredns "$COREDNS_BIN" -conf "$DATA/node/Corefile"
  wait_for containerd 30 ctr --address "$CONTAINERD_SOCK" version
  node_images
  start_kubelet
  start_proc kube-proxy "$KBIN/kube-proxy" --config "$DATA/node/kube-proxy.yaml" --v=1
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: local-path-storage}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner, namespace: local-path-storage}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF
  start_proc local-path-provisioner "$LPP_BIN" start --kubeconfig "$KUBECONFIG_ADMIN" \
    --config "$DATA/node/local-path/config.json" --helper-pod-file "$DATA/node/local-path/helperPod.yaml" \
    --namespace local-path-storage --service-account-name local-path-provisioner \
    --provisioner-name rancher.io/local-path --helper-image "$HELPER_IMAGE"
  wait_for "node $NODE_NAME Ready" 90 kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
  wait_for "CoreDNS answering for kubernetes.default" 30 dns_query kubernetes.default.svc.cluster.local
}

# ---------------------------------------------------------------- down
unmount_under() { # unmount everything mounted under DIR, deepest first
  local dir=$1 m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
    awk -v d="$dir" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
}
clean_iptables() { # drop the rules and chains the kubelet, kube-proxy and CNI plugins made
  local ipt t
  for ipt in iptables ip6tables; do
    command -v "$ipt-save" >/dev/null || continue
    for t in filter nat mangle; do
      "$ipt-save" -t "$t" 2>/dev/null | grep -E 'KUBE-|CNI-' >/dev/null || continue
      "$ipt-save" -t "$t" | grep -vE 'KUBE-|CNI-|rocketcluster' | "$ipt-restore" -T "$t" 2>/dev/null ||
        log "warning: could not clean $ipt table $t"
    done
  done
}
down() {
  # Pods first, while the kubelet still runs, so every sandbox gets its CNI teardown.
  if is_running kubelet && is_running kube-apiserver; then
    kc delete pods --all -A --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
    local end=$((SECONDS + 30))
    while ((SECONDS < end)); do
      ctr_k8s tasks ls 2>/dev/null | grep RUNNING >/dev/null || break
      sleep 0.5
    done
  fi
  local p
  stop_procs local-path-provisioner kube-proxy kubelet coredns kube-scheduler
  if is_running containerd; then
    local c
    for c in $(ctr_k8s tasks ls -q 2>/dev/null); do ctr_k8s tasks kill -s KILL "$c" >/dev/null 2>&1 || true; done
    sleep 0.5
    for c in $(ctr_k8s tasks ls -q 2>/dev/null); do ctr_k8s tasks delete -f "$c" >/dev/null 2>&1 || true; done
  fi
  stop_procs containerd
  for p in $(our_shim_pids); do kill -KILL "$p" 2>/dev/null || true; done
  stop_procs kube-controller-manager kube-apiserver
  stop_procs etcd
  # Pod network namespaces whose sandboxes did not get a CNI DEL.
  local ns
  for ns in /run/netns/cni-*; do
    [[ -e $ns ]] || continue
    umount "$ns" 2>/dev/null || true; rm -f "$ns"
  done
  # containerd (like `ip netns`) bind-mounts /run/netns on itself; undo that once no namespace is left.
  if mountpoint -q /run/netns && [[ -z $(ls -A /run/netns 2>/dev/null) ]]; then umount /run/netns 2>/dev/null || true; fi
  unmount_under "$STATE/"
  unmount_under "$RUN/"
  ip link show "$POD_BRIDGE" >/dev/null 2>&1 && ip link delete "$POD_BRIDGE"
  ip link show "$NODE_IF" >/dev/null 2>&1 && ip link delete "$NODE_IF"
  [[ -x $KBIN/kube-proxy ]] && "$KBIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  clean_iptables
  # Fresh cluster next time: drop etcd, kubelet and volume state (images stay in containerd's store).
  rm -rf "${STATE:?}/etcd" "$STATE/kubelet" "$STATE/local-path" "$STATE/cni-ipam" "$STATE/kubelet-plugins" "$RUN"
  rm -f "$KUBECONFIG_OUT"
  # Empty cgroups the kubelet made.
  local cg
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  log "down"
}

status() {
  local p rc=0
  for p in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy coredns \
    local-path-provisioner; do
    if is_running "$p"; then printf '  %-24s running (pid %s)\n' "$p" "$(cat "$PIDS/$p.pid")"
    else printf '  %-24s stopped\n' "$p"; fi
  done
  if is_running kube-apiserver; then
    echo "kubeconfig: $KUBECONFIG_OUT   logs: $LOGS"
    kc get nodes -o wide 2>/dev/null || true
  else rc=3; fi
  return $rc
}

tier() { if is_running kubelet; then echo node; elif is_running kube-apiserver; then echo control-plane; else echo none; fi; }

load_images() { # archives (.tar) or names of images in the local docker engine
  is_running containerd || die "node tier is not running (make k8s-up TIER=node)"
  local a
  for a in "$@"; do
    if [[ -f $a ]]; then ctr_k8s images import "$a"
    else bash "$REPO/images/build.sh" save "$a" | ctr_k8s images import -; fi
  done
}

cmd=${1:-status}; shift || true
case $cmd in
  up)
    t=${1:-control-plane}; t0=$SECONDS
    [[ $(id -u) -eq 0 ]] || die "needs root (network, mounts, cgroups)"
    control_plane_up
    log "control plane ready in $((SECONDS - t0))s"
    if [[ $t == node ]]; then node_up; log "node tier ready in $((SECONDS - t0))s"; fi
    ;;
  down) down ;;
  status) status ;;
  tier) tier ;;
  load-images) load_images "$@" ;;
  dns) dns_query "$@" ;;
  kubeconfig) [[ -f $PKI/admin.kubeconfig ]] || die "no cluster PKI yet (make k8s-up)"; publish_kubeconfig; echo "$KUBECONFIG_OUT" ;;
  *) die "usage: $0 up [control-plane|node] | down | status | load-images IMAGE..." ;;
esac
