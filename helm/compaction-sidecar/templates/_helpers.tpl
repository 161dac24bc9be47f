{{/*
Names and labels for the resources this chart renders itself (service mode, the
example agent). The public named templates for your own pods are in _sidecar.tpl.
*/}}

{{- define "compaction-sidecar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "compaction-sidecar.fullname" -}}
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

{{- define "compaction-sidecar.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "compaction-sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "compaction-sidecar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "compaction-sidecar.labels" -}}
helm.sh/chart: {{ include "compaction-sidecar.chart" . }}
{{ include "compaction-sidecar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "compaction-sidecar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "compaction-sidecar.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference: the digest wins over the tag. */}}
{{- define "compaction-sidecar.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end }}
{{- end }}

{{/* Pod annotations: the user's, plus scrape hints when metrics are on. */}}
{{- define "compaction-sidecar.podAnnotations" -}}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- if .Values.metrics.enabled }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: {{ .Values.metrics.path | quote }}
{{- end }}
{{- end }}

{{/*
Rejects combinations the schema cannot express, with a message saying what to set.
Runs from every public template, so a parent chart that only includes the named
templates gets the same checks.
*/}}
{{- define "compaction-sidecar.validate" -}}
{{- $v := .Values }}
{{- if and (eq $v.mode "service") (not $v.store.postgres.existingSecret) }}
{{- fail "mode=service needs PostgreSQL: set store.postgres.existingSecret (a Secret whose key store.postgres.key holds the DSN)" }}
{{- end }}
{{- if eq $v.summarizer.kind "gemini" }}
{{- if and (not $v.summarizer.gemini.apiKey.existingSecret) (not $v.summarizer.gemini.vertex.enabled) }}
{{- fail "summarizer.kind=gemini needs summarizer.gemini.apiKey.existingSecret or summarizer.gemini.vertex.enabled" }}
{{- end }}
{{- if and $v.summarizer.gemini.vertex.enabled (or (not $v.summarizer.gemini.vertex.project) (not $v.summarizer.gemini.vertex.location)) }}
{{- fail "summarizer.gemini.vertex.enabled needs summarizer.gemini.vertex.project and .location" }}
{{- end }}
{{- end }}
{{- if and $v.tls.clientCA.existingSecret (not $v.tls.existingSecret) }}
{{- fail "tls.clientCA.existingSecret (mutual TLS) needs tls.existingSecret (the server certificate)" }}
{{- end }}
{{- if and (eq $v.mode "sidecar") (eq $v.sidecar.storage.type "existingClaim") (not $v.sidecar.storage.existingClaim) }}
{{- fail "sidecar.storage.type=existingClaim needs sidecar.storage.existingClaim (a PVC name)" }}
{{- end }}
{{- if and $v.podDisruptionBudget.enabled (not (kindIs "invalid" $v.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" $v.podDisruptionBudget.maxUnavailable)) }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" }}
{{- end }}
{{- range $name, $p := $v.server.modelProfiles }}
{{- if ge (int64 $p.max_output_tokens) (int64 $p.input_window_tokens) }}
{{- fail (printf "server.modelProfiles.%s: max_output_tokens (%d) must be less than input_window_tokens (%d)" $name (int64 $p.max_output_tokens) (int64 $p.input_window_tokens)) }}
{{- end }}
{{- end }}
{{- if and $v.server.modelProfiles (not (hasKey . "Release")) }}
{{- fail "server.modelProfiles from a chart that includes these templates needs the release in the context (its ConfigMap is named after it): dict \"Values\" (index .Values \"compaction-sidecar\") \"Capabilities\" .Capabilities \"Release\" .Release" }}
{{- end }}
{{- if and (eq $v.mode "sidecar") $v.sidecar.native (hasKey . "Capabilities") }}
{{- if not (semverCompare ">=1.29.0-0" .Capabilities.KubeVersion.Version) }}
{{- fail (printf "sidecar.native needs Kubernetes >= 1.29 (this cluster: %s): set sidecar.native=false" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- end }}
{{- end }}
