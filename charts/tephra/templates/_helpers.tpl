{{/* Labels on every object of the chart. */}}
{{- define "tephra.labels" -}}
app.kubernetes.io/name: tephra
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The address of the extender that kube-scheduler calls (the leader, through its Service). */}}
{{- define "tephra.extenderURL" -}}
https://tephra-extender.{{ .Release.Namespace }}.svc:443/scheduler
{{- end -}}

{{/* Namespace selector of the namespaced webhooks. */}}
{{- define "tephra.namespaceSelector" -}}
{{- if .Values.webhooks.namespaceSelector -}}
{{ toYaml .Values.webhooks.namespaceSelector }}
{{- else -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ prepend .Values.webhooks.excludeNamespaces .Release.Namespace | uniq | toJson }}
{{- end -}}
{{- end -}}

{{/*
One webhook entry. Arguments (a dict): root (the chart's context), name, path, group (the
failurePolicy key), reinvoke ("" for validating webhooks), rules (a list of rule dicts),
namespaced (bool).
*/}}
{{- define "tephra.webhook" -}}
{{- $root := .root -}}
{{- $policy := index $root.Values.webhooks.failurePolicy .group -}}
- name: {{ .name }}
  failurePolicy: {{ $policy }}
  matchPolicy: Equivalent
  sideEffects: None
  admissionReviewVersions: [v1, v1beta1]
  timeoutSeconds: {{ if eq $policy "Fail" }}{{ $root.Values.webhooks.timeoutSeconds.failClosed }}{{ else }}{{ $root.Values.webhooks.timeoutSeconds.failOpen }}{{ end }}
  {{- if .reinvoke }}
  reinvocationPolicy: {{ .reinvoke }}
  {{- end }}
  clientConfig:
    service: {name: tephra, namespace: {{ $root.Release.Namespace }}, path: {{ .path }}, port: 443}
    {{- if eq $root.Values.tls.mode "files" }}
    caBundle: {{ $root.Values.tls.caBundle }}
    {{- else }}
    # Filled in by cert-manager's CA injector.
    caBundle: Cg==
    {{- end }}
  rules:
    {{- toYaml .rules | nindent 4 }}
  {{- if .namespaced }}
  namespaceSelector:
    {{- include "tephra.namespaceSelector" $root | nindent 4 }}
  {{- end }}
  {{- with .conditions }}
  matchConditions:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* cert-manager's CA injector annotation for the webhook configurations. */}}
{{- define "tephra.webhookAnnotations" -}}
{{- if eq .Values.tls.mode "certManager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/tephra-serving
{{- end }}
{{- end -}}
