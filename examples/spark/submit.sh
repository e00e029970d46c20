#!/usr/bin/env bash
# Submit an example job to Kubernetes in cluster mode: the driver and its executors run as pods of the
# Spark image, with the settings of docs/spark.md (Kubernetes).
#
#   APISERVER=https://<host>:6443 NAMESPACE=<namespace> examples/spark/submit.sh stream|batch \
#       [spark-submit options ...] [-- job arguments ...]
#
#   examples/spark/submit.sh stream -- --data /data/orders-pipeline
#   examples/spark/submit.sh batch --conf spark.executor.instances=4 -- \
#       --from 2026-11-25T10:00:00Z --to 2026-11-25T11:00:00Z --output /data/orders-by-hour/10
#
# Environment: APISERVER (required; `kubectl cluster-info` shows it), NAMESPACE (default `default`),
# IMAGE (default rocketcluster.local/spark:0.1.0), SPARK_SUBMIT (default: spark-submit on PATH, which the
# `spark` extra installs), TEMPLATE (default: pod-template.yaml next to this script). spark-submit
# authenticates with your kubeconfig ($KUBECONFIG or ~/.kube/config). Before the first run, apply
# k8s/rbac.yaml and k8s/pvc.yaml, and create the pipeline ConfigMap:
#   kubectl create configmap orders-pipeline --from-file=examples/spark/pipelines/
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${APISERVER:?set APISERVER to the API server URL, e.g. https://10.0.0.1:6443}"
NAMESPACE=${NAMESPACE:-default}
IMAGE=${IMAGE:-rocketcluster.local/spark:0.1.0}
SPARK_SUBMIT=${SPARK_SUBMIT:-spark-submit}
TEMPLATE=${TEMPLATE:-$HERE/k8s/pod-template.yaml}

case ${1:-} in
  stream) main=orders_stream.py name=orders-stream ;;
  batch) main=orders_batch.py name=orders-batch ;;
  *) echo "usage: $0 stream|batch [spark-submit options ...] [-- job arguments ...]" >&2; exit 2 ;;
esac
shift
spark_args=()
while [[ $# -gt 0 && $1 != -- ]]; do spark_args+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift

# Defaults first: a --conf given on the command line comes later and wins. The driver's Service is
# owned by the driver pod, so Kubernetes deletes it with the pod; deleting it (and on-demand executor
# PVCs, which these jobs do not use) from the driver would need more rights than k8s/rbac.yaml grants.
# -XX:TieredStopAtLevel=1: the JVMs compile with C1 only. A job's first tasks run cold code; the C2
# compiler's threads then compete with the tasks for the node's few cores (docs/spark.md).
exec "$SPARK_SUBMIT" \
  --master "k8s://$APISERVER" --deploy-mode cluster --name "$name" \
  --conf spark.kubernetes.namespace="$NAMESPACE" \
  --conf spark.kubernetes.container.image="$IMAGE" \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=spark-driver \
  --conf spark.kubernetes.authenticate.executor.serviceAccountName=spark-executor \
  --conf spark.kubernetes.driver.service.deleteOnTermination=false \
  --conf spark.kubernetes.driver.ownPersistentVolumeClaim=false \
  --conf spark.kubernetes.driver.reusePersistentVolumeClaim=false \
  --conf spark.kubernetes.driver.podTemplateFile="$TEMPLATE" \
  --conf spark.kubernetes.executor.podTemplateFile="$TEMPLATE" \
  --conf spark.driver.memory=1g \
  --conf spark.executor.instances=2 \
  --conf spark.executor.cores=1 \
  --conf spark.executor.memory=1g \
  --conf spark.sql.session.timeZone=UTC \
  --conf spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 \
  --conf spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 \
  "${spark_args[@]}" \
  "local:///opt/pipelines/$main" "$@"
