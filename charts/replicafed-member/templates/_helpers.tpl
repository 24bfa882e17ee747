{{- define "replicafed-member.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: replicafed-member
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: replicafed
{{- end }}

{{/*
ClusterRole and binding name: release-scoped, so two installs (two hubs
sharing a member) do not fight over one object.
*/}}
{{- define "replicafed-member.clusterRoleName" -}}
{{- printf "%s-replicafed-member" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
