{{/*
Public named templates: put the compaction sidecar into your own pod spec.

Each takes a context with `.Values` holding this chart's values: `.` inside this
chart; from a chart that depends on this one,
  (dict "Values" (index .Values "compaction-sidecar") "Capabilities" .Capabilities "Release" .Release)
(`.Capabilities` is optional: with it, a native sidecar is refused on a cluster
older than 1.29; `.Release` is needed with server.modelProfiles, whose ConfigMap
this chart renders under the release's name). In a pod template:

  spec:
    {{- with (include "compaction-sidecar.initContainers" $ctx | trim) }}
    initContainers:                 # the native sidecar (sidecar.native=true)
      {{- . | nindent 6 }}
    {{- end }}
    containers:
      - name: agent
        env:
          {{- include "compaction-sidecar.clientEnv" $ctx | nindent 10 }}
      {{- include "compaction-sidecar.containers" $ctx | nindent 6 }}   # plain container (native=false)
    volumes:
      {{- include "compaction-sidecar.volumes" $ctx | nindent 6 }}

(initContainers and containers render nothing when the other one holds the sidecar.)

`compaction-sidecar.container` is the container itself (one list item), for
placing it by hand. templates/example-agent.yaml shows the whole wiring.
*/}}

{{/* The address the agent dials: the API is on loopback, inside the pod. */}}
{{- define "compaction-sidecar.addr" -}}
127.0.0.1:{{ .Values.ports.api }}
{{- end }}

{{/*
EnvVar list items for the agent container: COMPACTION_ADDR, and COMPACTION_HEALTH_ADDR,
the sidecar's health listener. The startup gate every agent should use with a plain
container (sidecar.native=false), where the kubelet starts the agent and the sidecar
together: wait until Health.Check on COMPACTION_HEALTH_ADDR answers SERVING before the
first call (templates/example-agent.yaml does). A native sidecar is started, and its
startup probe passed, before the agent starts.
*/}}
{{- define "compaction-sidecar.clientEnv" -}}
- name: COMPACTION_ADDR
  value: {{ include "compaction-sidecar.addr" . | quote }}
- name: COMPACTION_HEALTH_ADDR
  value: {{ printf "127.0.0.1:%v" .Values.ports.health | quote }}
{{- end }}

{{/* The sidecar container as an init container (native sidecar), or nothing. */}}
{{- define "compaction-sidecar.initContainers" -}}
{{- if and (eq .Values.mode "sidecar") .Values.sidecar.native }}
{{- include "compaction-sidecar.container" . }}
{{- end }}
{{- end }}

{{/* The sidecar container as a plain container (older clusters), or nothing. */}}
{{- define "compaction-sidecar.containers" -}}
{{- if or (ne .Values.mode "sidecar") (not .Values.sidecar.native) }}
{{- include "compaction-sidecar.container" . }}
{{- end }}
{{- end }}

{{/* The pod security context that passes Pod Security "restricted". */}}
{{- define "compaction-sidecar.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}

{{/*
The container, one list item. In sidecar mode the API listens on 127.0.0.1 only
(nothing outside the pod can reach it) and SQLite lives on the data volume; in
service mode it listens on every address and the store is PostgreSQL. The health
listener is always on every address: the kubelet probes the pod IP.
*/}}
{{- define "compaction-sidecar.container" -}}
{{- include "compaction-sidecar.validate" . }}
{{- $v := .Values }}
{{- $sidecar := eq $v.mode "sidecar" -}}
- name: {{ $v.sidecar.containerName }}
  image: {{ include "compaction-sidecar.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if and $sidecar $v.sidecar.native }}
  restartPolicy: Always
  {{- end }}
  args:
    {{- include "compaction-sidecar.args" . | trim | nindent 4 }}
  env:
    {{- include "compaction-sidecar.env" . | trim | nindent 4 }}
  ports:
    {{- if not $sidecar }}
    - name: grpc
      containerPort: {{ $v.ports.api }}
      protocol: TCP
    {{- end }}
    - name: compaction-hc
      containerPort: {{ $v.ports.health }}
      protocol: TCP
    {{- if $v.metrics.enabled }}
    - name: compaction-mx
      containerPort: {{ $v.metrics.port }}
      protocol: TCP
    {{- end }}
  startupProbe:
    grpc:
      port: {{ $v.ports.health }}
    {{- toYaml $v.probes.startup | nindent 4 }}
  readinessProbe:
    grpc:
      port: {{ $v.ports.health }}
    {{- toYaml $v.probes.readiness | nindent 4 }}
  livenessProbe:
    grpc:
      port: {{ $v.ports.health }}
      service: liveness
    {{- toYaml $v.probes.liveness | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    {{- include "compaction-sidecar.volumeMounts" . | trim | nindent 4 }}
{{- end }}

{{- define "compaction-sidecar.args" -}}
{{- $v := .Values }}
{{- $host := ternary "127.0.0.1" "0.0.0.0" (eq $v.mode "sidecar") }}
- --listen={{ $host }}:{{ $v.ports.api }}
- --health-listen=0.0.0.0:{{ $v.ports.health }}
{{- if eq $v.mode "sidecar" }}
- --store=sqlite:///{{ trimSuffix "/" $v.store.sqlite.directory }}/{{ $v.store.sqlite.file }}
- --sqlite-synchronous={{ $v.store.sqlite.synchronous }}
{{- end }}
- --log-level={{ $v.server.logLevel }}
- --log-format={{ $v.server.logFormat }}
{{- if $v.metrics.enabled }}
- --metrics-listen=0.0.0.0:{{ $v.metrics.port }}
{{- end }}
- --shutdown-grace-s={{ $v.server.shutdownGraceSeconds }}
{{- with $v.server.defaultPolicy }}
- {{ printf "--default-policy=%s" (kindIs "map" . | ternary (toJson .) .) | toJson }}
{{- end }}
{{- with $v.server.maxEventBytes }}
- --max-event-bytes={{ int64 . }}
{{- end }}
{{- with $v.server.maxMessageBytes }}
- --max-message-bytes={{ int64 . }}
{{- end }}
{{- with $v.server.maxEventsPerAppend }}
- --max-events-per-append={{ int64 . }}
{{- end }}
{{- if not (kindIs "invalid" $v.server.readCacheMiB) }}
- --read-cache-mib={{ int64 $v.server.readCacheMiB }}
{{- end }}
- --summarizer={{ $v.summarizer.kind }}
{{- if eq $v.summarizer.kind "gemini" }}
{{- $g := $v.summarizer.gemini }}
{{- with $g.model }}
- {{ printf "--gemini-model=%s" . | toJson }}
{{- end }}
{{- with $g.baseUrl }}
- {{ printf "--gemini-base-url=%s" . | toJson }}
{{- end }}
{{- with $g.apiVersion }}
- {{ printf "--gemini-api-version=%s" . | toJson }}
{{- end }}
{{- if not (kindIs "invalid" $g.timeoutSeconds) }}
- --gemini-timeout-s={{ $g.timeoutSeconds }}
{{- end }}
{{- if not (kindIs "invalid" $g.maxRetries) }}
- --gemini-max-retries={{ int64 $g.maxRetries }}
{{- end }}
{{- end }}
{{- if $v.auth.existingSecret }}
- --auth-token-file=/etc/compaction/auth/tokens
{{- end }}
{{- if $v.tls.existingSecret }}
- --tls-cert=/etc/compaction/tls/tls.crt
- --tls-key=/etc/compaction/tls/tls.key
{{- end }}
{{- if $v.tls.clientCA.existingSecret }}
- --tls-client-ca=/etc/compaction/client-ca/ca.crt
{{- end }}
{{- if $v.server.modelProfiles }}
- --model-profiles={{ include "compaction-sidecar.modelProfilesPath" . }}
{{- end }}
{{- range $v.server.extraArgs }}
- {{ . | toJson }}
{{- end }}
{{- end }}

{{/* Secrets only ever arrive through secretKeyRef: no secret value is a chart value. */}}
{{- define "compaction-sidecar.env" -}}
{{- $v := .Values }}
- name: TMPDIR
  value: /tmp
{{- if eq $v.mode "service" }}
- name: COMPACTION_STORE
  valueFrom:
    secretKeyRef:
      name: {{ $v.store.postgres.existingSecret }}
      key: {{ $v.store.postgres.key }}
{{- if not (kindIs "invalid" $v.store.postgres.poolSize) }}
- name: COMPACTION_STORE_POOL_SIZE
  value: {{ $v.store.postgres.poolSize | int64 | quote }}
{{- end }}
{{- end }}
{{- with $v.pageTokenKey.existingSecret }}
- name: COMPACTION_PAGE_TOKEN_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $v.pageTokenKey.key }}
{{- end }}
{{- if eq $v.summarizer.kind "gemini" }}
{{- $g := $v.summarizer.gemini }}
{{- if $g.apiKey.existingSecret }}
- name: {{ $g.apiKey.envName }}
  valueFrom:
    secretKeyRef:
      name: {{ $g.apiKey.existingSecret }}
      key: {{ $g.apiKey.key }}
{{- end }}
{{- if $g.vertex.enabled }}
- name: GOOGLE_GENAI_USE_VERTEXAI
  value: "true"
- name: GOOGLE_CLOUD_PROJECT
  value: {{ $g.vertex.project | quote }}
- name: GOOGLE_CLOUD_LOCATION
  value: {{ $g.vertex.location | quote }}
{{- end }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "compaction-sidecar.volumeMounts" -}}
{{- $v := .Values }}
- name: compaction-tmp
  mountPath: /tmp
{{- if eq $v.mode "sidecar" }}
- name: compaction-data
  mountPath: {{ $v.store.sqlite.directory }}
{{- end }}
{{- if $v.auth.existingSecret }}
- name: compaction-auth
  mountPath: /etc/compaction/auth
  readOnly: true
{{- end }}
{{- if $v.tls.existingSecret }}
- name: compaction-tls
  mountPath: /etc/compaction/tls
  readOnly: true
{{- end }}
{{- if $v.tls.clientCA.existingSecret }}
- name: compaction-client-ca
  mountPath: /etc/compaction/client-ca
  readOnly: true
{{- end }}
{{- if $v.server.modelProfiles }}
- name: compaction-model-profiles
  mountPath: /etc/compaction/model-profiles
  readOnly: true
{{- end }}
{{- end }}

{{/*
Volume list items for the pod. With sidecar.storage.type=volumeClaimTemplate the
data volume comes from the StatefulSet's claim (compaction-sidecar.volumeClaimTemplate).
*/}}
{{- define "compaction-sidecar.volumes" -}}
{{- include "compaction-sidecar.validate" . }}
{{- $v := .Values -}}
- name: compaction-tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if eq $v.mode "sidecar" }}
{{- $s := $v.sidecar.storage }}
{{- if eq $s.type "emptyDir" }}
- name: compaction-data
  emptyDir:
    {{- with $s.medium }}
    medium: {{ . }}
    {{- end }}
    {{- with $s.sizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
{{- else if eq $s.type "existingClaim" }}
- name: compaction-data
  persistentVolumeClaim:
    claimName: {{ $s.existingClaim }}
{{- end }}
{{- end }}
{{- if $v.auth.existingSecret }}
- name: compaction-auth
  secret:
    secretName: {{ $v.auth.existingSecret }}
    defaultMode: 0444
    items:
      - key: {{ $v.auth.key }}
        path: tokens
{{- end }}
{{- if $v.tls.existingSecret }}
- name: compaction-tls
  secret:
    secretName: {{ $v.tls.existingSecret }}
    defaultMode: 0444
    items:
      - key: {{ $v.tls.certKey }}
        path: tls.crt
      - key: {{ $v.tls.keyKey }}
        path: tls.key
{{- end }}
{{- if $v.tls.clientCA.existingSecret }}
- name: compaction-client-ca
  secret:
    secretName: {{ $v.tls.clientCA.existingSecret }}
    defaultMode: 0444
    items:
      - key: {{ $v.tls.clientCA.key }}
        path: ca.crt
{{- end }}
{{- if $v.server.modelProfiles }}
- name: compaction-model-profiles
  configMap:
    name: {{ include "compaction-sidecar.modelProfilesConfigMap" . }}
    defaultMode: 0444
    items:
      - key: model-profiles.json
        path: model-profiles.json
{{- end }}
{{- end }}

{{/*
server.modelProfiles as the server's --model-profiles file: {"models": {name: profile}}.
The token counts go through int64: values from YAML arrive as floats.
*/}}
{{- define "compaction-sidecar.modelProfilesJson" -}}
{{- $models := dict }}
{{- range $name, $p := .Values.server.modelProfiles }}
{{- $_ := set $models $name (dict "provider" $p.provider "input_window_tokens" (int64 $p.input_window_tokens) "max_output_tokens" (int64 $p.max_output_tokens)) }}
{{- end }}
{{- toPrettyJson (dict "models" $models) }}
{{- end }}

{{/*
The ConfigMap holding it, named after the release and the file's content: a changed
profile map is a new name in the pod template, so the pods roll (in your chart's pods
too, which carry none of this chart's annotations). Reads no .Chart, so that it names
the same ConfigMap when included from another chart.
*/}}
{{- define "compaction-sidecar.modelProfilesConfigMap" -}}
{{- $base := .Values.fullnameOverride }}
{{- if not $base }}
{{- $name := default "compaction-sidecar" .Values.nameOverride }}
{{- $base = contains $name .Release.Name | ternary .Release.Name (printf "%s-%s" .Release.Name $name) }}
{{- end }}
{{- printf "%s-model-profiles-%s" ($base | trunc 36 | trimSuffix "-") (include "compaction-sidecar.modelProfilesJson" . | sha256sum | trunc 10) }}
{{- end }}

{{/* Where the sidecar container reads the file. */}}
{{- define "compaction-sidecar.modelProfilesPath" -}}
/etc/compaction/model-profiles/model-profiles.json
{{- end }}

{{/* A StatefulSet volumeClaimTemplates item for the SQLite data (one list item). */}}
{{- define "compaction-sidecar.volumeClaimTemplate" -}}
{{- $c := .Values.sidecar.storage.volumeClaimTemplate -}}
- metadata:
    name: compaction-data
  spec:
    accessModes:
      {{- toYaml $c.accessModes | nindent 6 }}
    {{- with $c.storageClassName }}
    storageClassName: {{ . }}
    {{- end }}
    resources:
      requests:
        storage: {{ $c.size }}
{{- end }}
