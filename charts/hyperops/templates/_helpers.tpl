{{/* The chart's name, truncated to a DNS label. */}}
{{- define "hyperops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the prefix of every object the chart creates. */}}
{{- define "hyperops.fullname" -}}
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

{{/* Labels shared by every object, without the component. */}}
{{- define "hyperops.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "hyperops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels of the bot's objects. */}}
{{- define "hyperops.labels" -}}
{{ include "hyperops.commonLabels" . }}
app.kubernetes.io/component: bot
{{- end }}

{{/* Labels of the bundled Redis's objects. */}}
{{- define "hyperops.redisLabels" -}}
{{ include "hyperops.commonLabels" . }}
app.kubernetes.io/component: redis
{{- end }}

{{/* Labels that select the bot's pods. */}}
{{- define "hyperops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hyperops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: bot
{{- end }}

{{/* Labels that select the bundled Redis pod. */}}
{{- define "hyperops.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "hyperops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{/* The service account the bot runs as. */}}
{{- define "hyperops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hyperops.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The bundled Redis's name. */}}
{{- define "hyperops.redisName" -}}
{{- printf "%s-redis" (include "hyperops.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The in-cluster clusters of the config: those with an empty kubeconfig, which the bot reaches with this chart's
service account. Rendered as a JSON list of the cluster maps.
*/}}
{{- define "hyperops.inClusterClusters" -}}
{{- $out := list }}
{{- range .Values.config.clusters }}
{{- if not (get . "kubeconfig") }}
{{- $out = append $out . }}
{{- end }}
{{- end }}
{{- $out | toJson }}
{{- end }}

{{/* The namespaces that get a Role: rbac.namespaces, else those of the in-cluster clusters. A JSON list. */}}
{{- define "hyperops.rbacNamespaces" -}}
{{- $ns := .Values.rbac.namespaces }}
{{- if not $ns }}
{{- range (include "hyperops.inClusterClusters" . | fromJsonArray) }}
{{- $ns = concat $ns (get . "namespaces" | default list) }}
{{- end }}
{{- end }}
{{- $ns | uniq | sortAlpha | toJson }}
{{- end }}

{{/* "true" when an in-cluster cluster impersonates the requester. */}}
{{- define "hyperops.impersonates" -}}
{{- $on := false }}
{{- range (include "hyperops.inClusterClusters" . | fromJsonArray) }}
{{- if get . "impersonate" }}{{ $on = true }}{{ end }}
{{- end }}
{{- $on }}
{{- end }}

{{/* The Redis URL the config carries for redis.mode. */}}
{{- define "hyperops.redisURL" -}}
{{- if eq .Values.redis.mode "bundled" }}
{{- printf "redis://%s.%s.svc:6379/0" (include "hyperops.redisName" .) .Release.Namespace }}
{{- else if eq .Values.redis.mode "external" }}
{{- print "${REDIS_URL}" }}
{{- end }}
{{- end }}

{{/* The HyperOps config file: .Values.config plus the keys the chart owns. */}}
{{- define "hyperops.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $slack := get $cfg "slack" | default dict }}
{{- $_ := set $slack "appToken" "${SLACK_APP_TOKEN}" }}
{{- $_ = set $slack "botToken" "${SLACK_BOT_TOKEN}" }}
{{- $_ = set $cfg "slack" $slack }}
{{- $redis := get $cfg "redis" | default dict }}
{{- $_ = set $redis "url" (include "hyperops.redisURL" .) }}
{{- $_ = set $cfg "redis" $redis }}
{{- $server := get $cfg "server" | default dict }}
{{- $_ = set $server "listen" (printf ":%d" (int .Values.server.port)) }}
{{- range $k := list "readTimeout" "idleTimeout" }}
{{- with get $.Values.server $k }}{{ $_ := set $server $k . }}{{ end }}
{{- end }}
{{- $_ = set $cfg "server" $server }}
{{- $mcp := get $cfg "mcp" | default dict }}
{{- $_ = set $mcp "listen" (ternary (printf ":%d" (int .Values.mcp.port)) "" .Values.mcp.enabled) }}
{{- range $k := list "sessionIdleTimeout" "maxSessionsPerAgent" "maxWaitsPerAgent" }}
{{- with get $.Values.mcp $k }}{{ $_ := set $mcp $k . }}{{ end }}
{{- end }}
{{- $_ = set $cfg "mcp" $mcp }}
{{- toYaml $cfg }}
{{- end }}

{{/* Checks of combinations the schema cannot express. */}}
{{- define "hyperops.validate" -}}
{{- if and (eq .Values.redis.mode "embedded") (gt (int .Values.replicaCount) 1) }}
{{- fail "redis.mode embedded keeps state in one process: set replicaCount to 1, or use redis.mode bundled or external" }}
{{- end }}
{{- if and (eq .Values.redis.mode "external") (not .Values.redis.external.existingSecret) }}
{{- fail "redis.mode external needs redis.external.existingSecret: the Secret holding the Redis URL" }}
{{- end }}
{{- if and .Values.mcp.enabled (eq (int .Values.mcp.port) (int .Values.server.port)) }}
{{- fail "mcp.port must differ from server.port: MCP has its own listener" }}
{{- end }}
{{- if and .Values.mcp.ingress.enabled (not .Values.mcp.enabled) }}
{{- fail "mcp.ingress.enabled needs mcp.enabled" }}
{{- end }}
{{- if and .Values.rbac.create (eq (include "hyperops.rbacNamespaces" . | fromJsonArray | len) 0) }}
{{- fail "no namespace gets a Role: list namespaces in config.clusters (with an empty kubeconfig) or rbac.namespaces" }}
{{- end }}
{{- end }}
