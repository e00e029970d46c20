{{/*
Names and labels shared by the templates.
*/}}

{{/* The chart's name, truncated to a DNS label. */}}
{{- define "rocketcluster-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name of the release's objects: <release>-<chart>, or the release name when it holds the chart name. */}}
{{- define "rocketcluster-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped objects (ClusterRole, ClusterRoleBinding) also carry the release's namespace, so the same
release name installed in two namespaces does not collide. */}}
{{- define "rocketcluster-operator.clusterScopedName" -}}
{{- printf "%s-%s" (include "rocketcluster-operator.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- define "rocketcluster-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* What the Deployment selects on: fixed for the life of a release. */}}
{{- define "rocketcluster-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rocketcluster-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rocketcluster-operator.labels" -}}
helm.sh/chart: {{ include "rocketcluster-operator.chart" . }}
{{ include "rocketcluster-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: rocketcluster
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "rocketcluster-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rocketcluster-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: with serviceAccount.create false, name an existing ServiceAccount" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The kopf peering object's name: per release and namespace when it is cluster-scoped. */}}
{{- define "rocketcluster-operator.peeringName" -}}
{{- if .Values.watchNamespaces -}}
{{- include "rocketcluster-operator.fullname" . -}}
{{- else -}}
{{- include "rocketcluster-operator.clusterScopedName" . -}}
{{- end -}}
{{- end -}}

{{/* kopf's peering (replicaCount > 1): it reads the peering objects, watches them, and patches its keep-alive
into their status; the active-replica check of our own loops reads them too (rocketcluster.peering). */}}
{{- define "rocketcluster-operator.peeringRule" -}}
{{- if gt (int .Values.replicaCount) 1 -}}
- apiGroups: ["kopf.dev"]
  resources: [{{ if .Values.watchNamespaces }}"kopfpeerings"{{ else }}"clusterkopfpeerings"{{ end }}]
  verbs: ["get", "list", "watch", "patch"]
{{- end -}}
{{- end -}}

{{- define "rocketcluster-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* kopf's flags for .Values.logLevel. */}}
{{- define "rocketcluster-operator.logLevelFlag" -}}
{{- if eq .Values.logLevel "debug" -}}
--verbose
{{- else if eq .Values.logLevel "warning" -}}
--quiet
{{- end -}}
{{- end -}}

{{/*
What the operator may do with the RocketClusters and their children, in a namespace (a Role) or in every
namespace (a ClusterRole). Every rule is one the operator uses:
- rocketclusters: kopf lists and watches them, patches its progress annotations onto them, and removes the
  finalizer that older builds added; the operator clears the manual-rolling-update annotation with a patch;
- rocketclusters/status: the status the operator writes;
- rocketclusters/finalizers: children carry an owner reference with blockOwnerDeletion, which API servers
  with the OwnerReferencesPermissionEnforcement admission plugin allow only to who may update this;
- StatefulSets, Services, ConfigMaps, ServiceAccounts, PodDisruptionBudgets, NetworkPolicies: server-side
  applied (create on the first apply, patch after); a broker group's StatefulSet, ConfigMap and PDB are
  deleted when the group is removed, a NetworkPolicy when spec.networkPolicy turns off; StatefulSets are listed
  every pass, and read while one is recreated to grow its volumes;
- Pods: listed and watched (a pod that changes starts a reconcile of its cluster), and deleted one at a time
  by a rolling restart; PVCs: listed, patched to grow, and deleted per retention;
- Events: kopf posts them for every restart and scale step;
- rockettopics, rocketconsumergroups: kopf lists and watches them, and adds and removes its finalizer on those
  with deletionPolicy Delete (patch); the operator reads one before each pass; their status is the
  operator's to write.
Nothing here reads Secrets or creates Pods directly.
*/}}
{{- define "rocketcluster-operator.namespacedRules" -}}
- apiGroups: ["rocketcluster.io"]
  resources: ["rocketclusters"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["rocketcluster.io"]
  resources: ["rocketclusters/status"]
  verbs: ["patch"]
- apiGroups: ["rocketcluster.io"]
  resources: ["rocketclusters/finalizers"]
  verbs: ["update"]
- apiGroups: ["rocketcluster.io"]
  resources: ["rockettopics", "rocketconsumergroups", "rocketusers"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["rocketcluster.io"]
  resources: ["rockettopics/status", "rocketconsumergroups/status", "rocketusers/status"]
  verbs: ["patch"]
{{- /* spec.security: the operator's own credentials and each RocketUser's Secret (made and updated by the
operator), and a certificate Secret it reads; cert-manager Certificates for tls.issuerRef. */}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch"]
- apiGroups: ["cert-manager.io"]
  resources: ["certificates"]
  verbs: ["create", "patch"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["services", "serviceaccounts"]
  verbs: ["create", "patch"]
{{- /* spec.externalAccess: the cluster's external Services are listed each pass (their load balancers'
addresses) and deleted when no longer wanted. */}}
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "patch", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{/*
Cluster-scoped reads, needed in both modes:
- StorageClasses: a spec naming a class that does not exist is reported as InvalidSpec instead of leaving
  claims Pending;
- CustomResourceDefinitions: kopf watches them to notice the RocketCluster CRD changing (without it, kopf
  logs a permission warning and sees the CRD only at start); the operator gets cert-manager's to know whether
  spec.security.tls.issuerRef can be served;
- Nodes (get, one by one): with spec.failover a pass reads the nodes its broker pods are bound to, to fence
  (force-delete) a pod whose node is lost, once an in-sync replica took over its mastership.
*/}}
{{- define "rocketcluster-operator.clusterRules" -}}
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
{{- end -}}
