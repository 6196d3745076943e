{{/* Names and labels shared by the chart's objects. */}}
{{- define "sluice.name" -}}sluice-controller{{- end -}}

{{- define "sluice.labels" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/component: controller
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sluice.selector" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/component: controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The rules of a kind (ClusterRole or Role) in deploy/kubernetes/rbac.yaml (files/rbac.yaml links to it): the chart
grants exactly what the tests run the controller with.
*/}}
{{- define "sluice.rules" -}}
{{- $kind := .kind -}}
{{- range $doc := splitList "\n---\n" (.root.Files.Get "files/rbac.yaml") -}}
{{- $o := fromYaml $doc -}}
{{- if eq (get $o "kind") $kind }}
{{ dict "rules" (get $o "rules") | toYaml }}
{{- end -}}
{{- end -}}
{{- end -}}
