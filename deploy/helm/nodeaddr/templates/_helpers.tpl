{{/* The chart name (app.kubernetes.io/name, the DaemonSet selector and the Prometheus job). */}}
{{- define "nodeaddr.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names: the release name if it contains the chart name, else release-chart. */}}
{{- define "nodeaddr.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nodeaddr.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nodeaddr.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Selector labels: only the name, as in the kustomize base (a DaemonSet selector is immutable). */}}
{{- define "nodeaddr.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodeaddr.name" . }}
{{- end }}

{{/* The standard labels (app.kubernetes.io/*), on every object and on the pod template. */}}
{{- define "nodeaddr.labels" -}}
{{ include "nodeaddr.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The port of a bind address (":9810" -> 9810); empty when the address is "0" or empty. */}}
{{- define "nodeaddr.port" -}}
{{- $a := toString . }}
{{- if and (ne $a "0") (ne $a "") }}{{ regexFind "[0-9]+$" $a }}{{ end }}
{{- end }}
