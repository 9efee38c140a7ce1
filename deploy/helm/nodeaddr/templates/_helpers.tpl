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

{{/* The approver's objects (Deployment, ServiceAccount, Lease): the full name with -approver. */}}
{{- define "nodeaddr.approverName" -}}
{{- printf "%s-approver" (include "nodeaddr.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The approver's selector labels: a name of its own, which the DaemonSet's selector, the agents'
Service and the check-install agent selector do not match. */}}
{{- define "nodeaddr.approverSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-approver" (include "nodeaddr.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The conflict detector's objects (its Service and ServiceMonitor): the full name with -conflicts. */}}
{{- define "nodeaddr.conflictsName" -}}
{{- printf "%s-conflicts" (include "nodeaddr.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The conflict detector's selector labels, a name of its own as the approver's. */}}
{{- define "nodeaddr.conflictsSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-conflicts" (include "nodeaddr.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The standard labels of the approver's Deployment, pod template and Service. */}}
{{- define "nodeaddr.approverLabels" -}}
{{ include "nodeaddr.approverSelectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The remediator's name, selector labels and standard labels, as the approver's. */}}
{{- define "nodeaddr.remediatorName" -}}
{{- printf "%s-remediator" (include "nodeaddr.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nodeaddr.remediatorSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-remediator" (include "nodeaddr.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nodeaddr.remediatorLabels" -}}
{{ include "nodeaddr.remediatorSelectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
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

{{/*
Values that would silently widen the agents' privileges are refused at render time (the schema's
checks of types and ranges are in values.schema.json).
*/}}
{{- define "nodeaddr.refusals" -}}
{{- if and .Values.rbac.create (not .Values.admissionPolicy.enabled) }}
{{- fail "admissionPolicy.enabled=false with rbac.create=true: the ClusterRole lets every agent patch every Node; without the admission policy nothing confines an agent to its own Node (set rbac.create=false and grant the rights yourself if you really mean it)" }}
{{- end }}
{{- if not .Values.serviceAccount.create }}
{{- fail "serviceAccount.create=false: nodeaddr needs a ServiceAccount of its own; a preexisting or shared one would give every pod using it nodeaddr's rights (and subject them to its admission policy)" }}
{{- end }}
{{- if eq (include "nodeaddr.serviceAccountName" .) "default" }}
{{- fail "serviceAccount.name=default: every pod of the namespace without an account of its own would get nodeaddr's rights; leave it empty or name an account only nodeaddr uses" }}
{{- end }}
{{- if not .Values.securityContext }}
{{- fail "securityContext is empty: the container would run with the runtime's defaults (privilege escalation, capabilities, writable root); keep the chart's or set your own" }}
{{- end }}
{{- if not .Values.podSecurityContext }}
{{- fail "podSecurityContext is empty: the pod would run as the image's user without a seccomp profile; keep the chart's or set your own" }}
{{- end }}
{{- if or (dig "privileged" false (.Values.securityContext | default dict)) (dig "allowPrivilegeEscalation" false (.Values.securityContext | default dict)) }}
{{- fail "securityContext: nodeaddr needs neither privileged nor allowPrivilegeEscalation" }}
{{- end }}
{{- if not (regexMatch "^[A-Za-z0-9./_=, -]*$" (toString .Values.config.annotations)) }}
{{- fail "config.annotations: only presets and KEY=FORMAT items (letters, digits, . / _ = , - and spaces); it is rendered into the admission policy" }}
{{- end }}
{{- end }}

{{/* The image reference: REPOSITORY:TAG, or REPOSITORY:TAG@DIGEST with image.digest (pinned: the
container runtime pulls by digest, the tag only names it). The chart of a development version
(-dev, from a checkout of main) refuses to render the default image, which is never published
(every pod would sit in ImagePullBackOff): `make image` pushes one and prints the values. */}}
{{- define "nodeaddr.image" -}}
{{- if and (eq .Values.image.repository "ghcr.io/nodeaddr/nodeaddr") (not .Values.image.tag) (not .Values.image.digest) (hasSuffix "-dev" .Chart.AppVersion) }}
{{- fail (printf "no image chosen: the default %s:%s is a development version, never published. Build and push yours with `make image REGISTRY=HOST/PATH` and install with the --set image.repository=... --set image.digest=... it prints (or set image.tag to a tag you pushed)" .Values.image.repository .Chart.AppVersion) }}
{{- end }}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- with .Values.image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{/* "true" when the monitoring objects are rendered: monitoring.enabled, or a kube-prometheus-stack
release named (monitoring.kubePrometheusStack.release). */}}
{{- define "nodeaddr.monitoring" -}}
{{- if or .Values.monitoring.enabled .Values.monitoring.kubePrometheusStack.release }}true{{ end }}
{{- end }}

{{/* The `release` label kube-prometheus-stack's Prometheus selects ServiceMonitors and
PrometheusRules by (serviceMonitorSelector and ruleSelector: matchLabels release: <release name>). */}}
{{- define "nodeaddr.kubePrometheusStackLabels" -}}
{{- with .Values.monitoring.kubePrometheusStack.release }}release: {{ . | quote }}{{ end }}
{{- end }}

{{/* The username of kube-prometheus-stack's Prometheus ServiceAccount, named as that chart names
it: "<fullname>-prometheus", where fullname is its fullnameOverride, else the release name when it
contains "kube-prometheus-stack", else RELEASE-kube-prometheus-stack, cut to 26 characters and a
trailing "-" (so release "prometheus" gives prometheus-kube-prometheus-prometheus). Empty without a
release. */}}
{{- define "nodeaddr.kubePrometheusStackScraper" -}}
{{- $s := .Values.monitoring.kubePrometheusStack }}
{{- if $s.release }}
{{- $full := "" }}
{{- if $s.fullnameOverride }}
{{- $full = $s.fullnameOverride | trunc 26 | trimSuffix "-" }}
{{- else if contains "kube-prometheus-stack" $s.release }}
{{- $full = $s.release | trunc 26 | trimSuffix "-" }}
{{- else }}
{{- $full = printf "%s-kube-prometheus-stack" $s.release | trunc 26 | trimSuffix "-" }}
{{- end }}
{{- printf "system:serviceaccount:%s:%s-prometheus" $s.namespace $full }}
{{- end }}
{{- end }}

{{/* The usernames allowed to scrape /metrics, comma-separated: the list `scrapers`
(config.metricsAllowedScrapers) and the kube-prometheus-stack Prometheus of
monitoring.kubePrometheusStack (once). Empty: a SubjectAccessReview decides. Called with
(dict "root" $ "scrapers" LIST). */}}
{{- define "nodeaddr.allowedScrapers" -}}
{{- $l := .scrapers | default list }}
{{- with include "nodeaddr.kubePrometheusStackScraper" .root }}
{{- $l = append $l . }}
{{- end }}
{{- join "," ($l | uniq) }}
{{- end }}
