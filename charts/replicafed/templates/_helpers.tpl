{{/*
Chart name, truncated for label values.
*/}}
{{- define "replicafed.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name. It names the StatefulSet, so it is cut to 52 characters: the
StatefulSet controller adds a revision hash label to pod names.
*/}}
{{- define "replicafed.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Headless Service that gives every raft peer a stable DNS name.
*/}}
{{- define "replicafed.headlessName" -}}
{{- printf "%s-peers" (include "replicafed.fullname" .) }}
{{- end }}

{{- define "replicafed.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "replicafed.selectorLabels" -}}
app.kubernetes.io/name: {{ include "replicafed.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "replicafed.labels" -}}
helm.sh/chart: {{ include "replicafed.chart" . }}
{{ include "replicafed.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: replicafed
{{- end }}

{{- define "replicafed.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "replicafed.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "replicafed.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Namespace of member kubeconfig Secrets.
*/}}
{{- define "replicafed.secretNamespace" -}}
{{- default .Release.Namespace .Values.clusters.secretNamespace }}
{{- end }}

{{/*
Where the config file, raft TLS files and static member kubeconfigs are mounted.
*/}}
{{- define "replicafed.configDir" -}}/etc/replicafed{{- end }}
{{- define "replicafed.tlsDir" -}}/etc/replicafed/raft-tls{{- end }}
{{- define "replicafed.clustersDir" -}}/etc/replicafed/clusters{{- end }}

{{/*
The replicafed config file as a dict: generated from values, then
.Values.config merged over it. raft.id and raft.advertiseAddress stay empty:
the binary resolves them from $POD_NAME and this pod's raft.peers entry.
*/}}
{{- define "replicafed.config" -}}
{{- $fullname := include "replicafed.fullname" . }}
{{- $headless := include "replicafed.headlessName" . }}
{{- $peers := list }}
{{- range $i := until (int .Values.replicas) }}
{{- $id := printf "%s-%d" $fullname $i }}
{{- $peers = append $peers (dict "id" $id "address" (printf "%s.%s.%s.svc:%d" $id $headless $.Release.Namespace (int $.Values.raft.port))) }}
{{- end }}
{{- $tls := dict "insecure" true }}
{{- if not .Values.raft.tls.insecure }}
{{- $dir := include "replicafed.tlsDir" . }}
{{- $keys := include "replicafed.tlsKeys" . | fromYaml }}
{{- $tls = dict "certFile" (printf "%s/%s" $dir $keys.cert) "keyFile" (printf "%s/%s" $dir $keys.key) "caFile" (printf "%s/%s" $dir $keys.ca) }}
{{- end }}
{{- $static := list }}
{{- range .Values.clusters.static }}
{{- $entry := dict "name" .name "kubeconfig" (printf "%s/%s/%s" (include "replicafed.clustersDir" $) .name (default "kubeconfig" .secretKey)) }}
{{- if .labels }}
{{- $_ := set $entry "labels" .labels }}
{{- end }}
{{- if .taints }}
{{- $_ := set $entry "taints" .taints }}
{{- end }}
{{- $static = append $static $entry }}
{{- end }}
{{- $cfg := dict
  "logging" (dict "level" .Values.logging.level "format" .Values.logging.format)
  "hub" (dict "namespace" .Release.Namespace "qps" .Values.hub.qps "burst" .Values.hub.burst
    "leaderLease" (dict "name" (include "replicafed.leaderLeaseName" .) "renewInterval" .Values.leaderLease.renewInterval))
  "clusters" (dict
    "secretNamespace" (include "replicafed.secretNamespace" .)
    "secretSelector" .Values.clusters.secretSelector
    "secretKey" .Values.clusters.secretKey
    "static" $static)
  "raft" (dict
    "bindAddress" (printf "0.0.0.0:%d" (int .Values.raft.port))
    "adminAddress" (printf "0.0.0.0:%d" (int .Values.raft.adminPort))
    "peers" $peers
    "clusterID" (default $fullname .Values.raft.clusterID)
    "deadServerTimeout" .Values.raft.deadServerTimeout
    "dataDir" .Values.raft.dataDir
    "heartbeatTimeout" .Values.raft.heartbeatTimeout
    "electionTimeout" .Values.raft.electionTimeout
    "leaderLeaseTimeout" .Values.raft.leaderLeaseTimeout
    "tls" $tls)
  "controller" (deepCopy .Values.controller)
  "failover" (deepCopy .Values.failover)
  "metrics" (dict "bindAddress" (printf ":%d" (int .Values.metrics.port)) "secure" .Values.metrics.secure "perFRS" .Values.metrics.perFRS)
  "health" (dict "probeAddress" (printf ":%d" (int .Values.health.port)))
}}
{{- $merged := mergeOverwrite (deepCopy $cfg) (deepCopy .Values.config) }}
{{- /* Ports, mounts and peers are derived from values; an override here would
       leave the pod spec and the config disagreeing. */}}
{{- range $key := list "bindAddress" "adminAddress" "dataDir" "tls" "peers" "id" "advertiseAddress" }}
{{- if hasKey ($.Values.config.raft | default dict) $key }}
{{- fail (printf "config.raft.%s is derived by the chart; set the raft.* values instead" $key) }}
{{- end }}
{{- end }}
{{- if hasKey (.Values.config.metrics | default dict) "bindAddress" }}
{{- fail "config.metrics.bindAddress is derived by the chart; set metrics.port instead" }}
{{- end }}
{{- if hasKey (.Values.config.metrics | default dict) "perFRS" }}
{{- fail "config.metrics.perFRS is derived by the chart (the alerts depend on it); set metrics.perFRS instead" }}
{{- end }}
{{- if hasKey (.Values.config.hub | default dict) "leaderLease" }}
{{- fail "config.hub.leaderLease is derived by the chart (its RBAC names the Lease); set leaderLease.* instead" }}
{{- end }}
{{- if hasKey (.Values.config.health | default dict) "probeAddress" }}
{{- fail "config.health.probeAddress is derived by the chart; set health.port instead" }}
{{- end }}
{{- if hasKey (.Values.config.raft | default dict) "adminToken" }}
{{- fail "config.raft.adminToken would put a secret in a ConfigMap; set raft.adminToken.secretName instead" }}
{{- end }}
{{- toYaml $merged }}
{{- end }}

{{/*
The Secret holding the raft certificates: yours (raft.tls.secretName) or the
one the chart provides (cert-manager or generated).
*/}}
{{- define "replicafed.tlsSecretName" -}}
{{- default (printf "%s-raft-tls" (include "replicafed.fullname" .)) .Values.raft.tls.secretName }}
{{- end }}

{{/*
Keys of the certificate, key and CA in that Secret: yours as set in values;
the chart's (and cert-manager's) are tls.crt, tls.key and ca.crt.
*/}}
{{- define "replicafed.tlsKeys" -}}
{{- if .Values.raft.tls.secretName }}
{{- dict "cert" .Values.raft.tls.certKey "key" .Values.raft.tls.keyKey "ca" .Values.raft.tls.caKey | toYaml }}
{{- else }}
{{- dict "cert" "tls.crt" "key" "tls.key" "ca" "ca.crt" | toYaml }}
{{- end }}
{{- end }}

{{/*
DNS names the peers' certificate must be valid for: every pod's name under
the headless Service (their first label is the pod name, the raft identity),
the wildcard for pods added by scaling up, and raft.tls.extraDNSNames.
*/}}
{{- define "replicafed.peerDNSNames" -}}
{{- $fullname := include "replicafed.fullname" . }}
{{- $domain := printf "%s.%s.svc" (include "replicafed.headlessName" .) .Release.Namespace }}
{{- $names := list }}
{{- /* Each pod's bare name is its raft server ID: a certificate stands for a
       peer by that name, whatever form its raft address takes. */}}
{{- range $i := until (int .Values.replicas) }}
{{- $names = append $names (printf "%s-%d" $fullname $i) }}
{{- $names = append $names (printf "%s-%d.%s" $fullname $i $domain) }}
{{- end }}
{{- $names = append $names (printf "*.%s" $domain) }}
{{- $names = concat $names .Values.raft.tls.extraDNSNames }}
{{- toYaml $names }}
{{- end }}

{{/*
The uninstall guard's name: cluster-scoped, so it carries the namespace too.
*/}}
{{- define "replicafed.guardName" -}}
{{- printf "%s-finalizer-guard.%s" (include "replicafed.fullname" .) .Release.Namespace }}
{{- end }}

{{/*
The leader Lease's name, or "" when leaderLease is off.
*/}}
{{- define "replicafed.leaderLeaseName" -}}
{{- if .Values.leaderLease.enabled }}
{{- printf "%s-leader" (include "replicafed.fullname" .) }}
{{- end }}
{{- end }}

{{/*
Label matchers picking this installation's series in alert expressions.
*/}}
{{- define "replicafed.alertSelector" -}}
{{- default (printf "job=%q" (printf "%s-metrics" (include "replicafed.fullname" .))) .Values.metrics.prometheusRule.selector }}
{{- end }}
