#!/bin/bash
# Entry point of the Spark image. Spark's Kubernetes backend starts its pods with the first argument
# `driver` or `executor` and passes everything else through arguments and SPARK_* variables; the pyspark
# wheel ships no entry point for that, so this is ours. Any other command (python3, sh) runs as given.
set -euo pipefail

case "${1:-}" in
  driver)
    shift
    # spark-submit (cluster mode) created this pod; inside it the driver runs in client mode, bound to
    # the pod's IP, which Spark passes as SPARK_DRIVER_BIND_ADDRESS.
    exec /opt/venv/bin/spark-submit --deploy-mode client \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" "$@"
    ;;
  executor)
    shift
    # The driver hands the executor's JVM options over one per variable (SPARK_JAVA_OPT_0, _1, ...);
    # they include the --add-opens flags Spark needs on Java 17, so all of them go first, in order.
    java_opts=()
    while IFS= read -r name; do
      java_opts+=("${!name}")
    done < <(compgen -e | grep '^SPARK_JAVA_OPT_[0-9]*$' | sort -t_ -k4 -n)
    classpath="${SPARK_CONF_DIR:-/opt/spark/conf}:${SPARK_HOME}/jars/*"
    if [[ -n ${SPARK_CLASSPATH:-} ]]; then classpath="${SPARK_CLASSPATH}:${classpath}"; fi
    exec "${JAVA_HOME}/bin/java" "${java_opts[@]}" -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
      -cp "${classpath}" org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL}" --executor-id "${SPARK_EXECUTOR_ID}" \
      --cores "${SPARK_EXECUTOR_CORES}" --app-id "${SPARK_APPLICATION_ID}" \
      --hostname "${SPARK_EXECUTOR_POD_IP}" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME}"
    ;;
  "")
    exec python3
    ;;
  *)
    exec "$@"
    ;;
esac
