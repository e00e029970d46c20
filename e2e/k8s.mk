# Kubernetes test harness and images. Included by the top-level Makefile.
#   make k8s-build                      build (or reuse) every component under ~/.cache/rocketcluster
#   make k8s-up TIER=control-plane|node start a tier; kubeconfig at .data/k8s/kubeconfig
#   make k8s-status / make k8s-down     show / stop everything (no process, mount, interface, rule left)
#   make images [IMAGES="broker spark"] build images under images/ with Debian's docker.io, no registry
#   make k8s-load-images [IMAGES=...]   import built images into the node's containerd
#   make e2e [E2E=e2e/test_x.py ...]    the e2e tests (start the tiers they need, once per run); E2E picks files;
#                                       E2E_WORKERS=0 runs them in one pytest process instead of two
#   make kind-build                     kind, kindnetd and the kind node image, offline (e2e/kind/)
#   make kind-up [NODES=3] / kind-down  a kind cluster of NODES nodes from our node image, our images loaded
#   make e2e-kind                       the multi-node tests (marker `kind`) on that cluster
TIER ?= control-plane
IMAGES ?=
E2E ?= e2e
E2E_ARGS ?=
# pytest processes sharing the cluster, each running whole files (and e2e/conftest.py's groups); 0: one process
E2E_WORKERS ?= 2
NODES ?= 3

.PHONY: k8s-build k8s-up k8s-down k8s-status k8s-load-images images e2e e2e-control-plane
.PHONY: kind-build kind-up kind-down kind-status e2e-kind

k8s-build:
	bash e2e/deps.sh all
	bash e2e/build.sh all

k8s-up:
	bash e2e/cluster.sh up $(TIER)

k8s-down:
	bash e2e/cluster.sh down
	bash images/build.sh docker-stop

k8s-status:
	bash e2e/cluster.sh status

images: $(STAMP)
	bash images/build.sh $(IMAGES)

k8s-load-images:
	bash e2e/cluster.sh load-images $(if $(IMAGES),$(foreach i,$(IMAGES),rocketcluster.local/$(i):0.1.0),$(shell cat /var/lib/rocketcluster/images/built.txt 2>/dev/null))

# Control-plane tier only: what CI always runs (seconds once built).
e2e-control-plane: $(SPARK_STAMP)
	bash e2e/build.sh control-plane
	$(BIN)/pytest $(E2E) -m 'k8s and not node' --timeout 600 $(E2E_ARGS)

e2e: $(SPARK_STAMP)
	bash e2e/deps.sh all
	bash e2e/build.sh all
	$(BIN)/pytest $(E2E) -n $(E2E_WORKERS) --dist loadfile --timeout 900 --durations=0 $(E2E_ARGS)

# kindnetd's source is a git clone of kubernetes-sigs/kind: KIND_SRC=<dir> (see docs/kubernetes-harness.md).
kind-build:
	bash e2e/deps.sh all
	bash e2e/build.sh kind kubeadm kindnetd crictl kube-router
	bash e2e/kind/build-node.sh

kind-up:
	bash e2e/kind/cluster.sh up $(NODES)

kind-down:
	bash e2e/kind/cluster.sh down

kind-status:
	bash e2e/kind/cluster.sh status

e2e-kind: $(SPARK_STAMP)
	E2E_KIND=1 $(BIN)/pytest $(E2E) -m kind --timeout 1200 --durations=0 $(E2E_ARGS)
