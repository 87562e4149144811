{{/* Names and labels shared by every object of the chart. */}}
{{- define "rollout.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "rollout.labels" -}}
app.kubernetes.io/part-of: rollout
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "rollout.redisSecret" -}}
{{ .Values.redis.existingSecret | default (printf "%s-redis" .Release.Name) }}
{{- end }}

{{/* The pod spec parts every service shares: security, the env sources, metrics annotations. */}}
{{- define "rollout.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- define "rollout.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end }}

{{- define "rollout.envFrom" -}}
envFrom:
  - configMapRef:
      name: {{ .root.Release.Name }}-common
  - configMapRef:
      name: {{ .root.Release.Name }}-{{ .service }}
{{- if .redis }}
  - secretRef:
      name: {{ include "rollout.redisSecret" .root }}
{{- end }}
{{- if .root.Values.kafka.existingSecret }}
  - secretRef:
      name: {{ .root.Values.kafka.existingSecret }}
{{- end }}
{{- end }}

{{- define "rollout.metricsAnnotations" -}}
{{- if .root.Values.prometheus.podAnnotations }}
annotations:
  prometheus.io/scrape: "true"
  prometheus.io/port: {{ .port | quote }}
  prometheus.io/path: /metrics
{{- end }}
{{- end }}

{{- define "rollout.kubeconfig" -}}
{{- if .Values.managementCluster.kubeconfigSecret }}
- name: ROLLOUT_KUBECONFIG
  value: /etc/rollout/management/kubeconfig
{{- end }}
{{- end }}
