{{/*
Names, labels and the lists of kflare kinds the templates share.
*/}}

{{- define "kflare.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name: the release name when it already contains the chart name (a release called kflare gives kflare),
else <release>-<chart>. Kept to 52 characters so that the Services' names (<fullname>-metrics, <fullname>-webhook)
stay within the 63 a Service name allows.
*/}}
{{- define "kflare.fullname" -}}
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

{{- define "kflare.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object (no component: each object adds its own). */}}
{{- define "kflare.labels" -}}
helm.sh/chart: {{ include "kflare.chart" . }}
app.kubernetes.io/name: {{ include "kflare.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kflare
{{- end }}

{{/* The controller pods' selector. */}}
{{- define "kflare.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kflare.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "kflare.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kflare.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kflare.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* As YAML lists: (include "kflare.plurals" .) is every kind; with a suffix, "zones/status"... */}}
{{- define "kflare.plurals" -}}
{{- range splitList "\n" (include "kflare.clusterPlurals" .) }}
- {{ . }}
{{- end }}
{{- range splitList "\n" (include "kflare.namespacedPlurals" .) }}
- {{ . }}
{{- end }}
{{- end }}

{{- define "kflare.subresources" -}}
{{- $sub := .sub }}
{{- range splitList "\n" (include "kflare.clusterPlurals" .root) }}
- {{ . }}/{{ $sub }}
{{- end }}
{{- range splitList "\n" (include "kflare.namespacedPlurals" .root) }}
- {{ . }}/{{ $sub }}
{{- end }}
{{- end }}

{{/*
The serving certificate: one Secret (tls.crt, tls.key, ca.crt) for the webhook listener and, unless
metrics.certSecret names another, the metrics listener. Issued for both Services' names. The controller's own (it
makes and keeps it: `--webhook-cert-secret`) and cert-manager's have different names, and neither is the name the
chart's generated one had, so that switching between them never meets a Secret another one owns.
*/}}
{{- define "kflare.servingCertSecret" -}}
{{- if .Values.webhook.certManager.enabled }}
{{- printf "%s-serving-cert-cm" (include "kflare.fullname" .) }}
{{- else }}
{{- printf "%s-webhook-tls" (include "kflare.fullname" .) }}
{{- end }}
{{- end }}

{{/* The controller makes and keeps the serving certificate itself (no cert-manager): true or empty. */}}
{{- define "kflare.controllerKeepsCert" -}}
{{- if and (include "kflare.servingCertEnabled" .) (not .Values.webhook.certManager.enabled) }}true{{ end }}
{{- end }}

{{- define "kflare.metricsUsesServingCert" -}}
{{- if and .Values.metrics.enabled .Values.metrics.secure (not .Values.metrics.certSecret) }}true{{ end }}
{{- end }}

{{- define "kflare.servingCertEnabled" -}}
{{- if or .Values.webhook.enabled (include "kflare.metricsUsesServingCert" .) }}true{{ end }}
{{- end }}

{{- define "kflare.servingCertDNSNames" -}}
{{- $fullname := include "kflare.fullname" . }}
{{- range $service := list "webhook" "metrics" }}
- {{ $fullname }}-{{ $service }}.{{ $.Release.Namespace }}.svc
- {{ $fullname }}-{{ $service }}.{{ $.Release.Namespace }}.svc.cluster.local
{{- end }}
{{- end }}

{{/* Where the controller container reads the certificates: cert-manager's Secret mounted, or the one the controller
keeps, written by it into its /tmp (an emptyDir: the root filesystem is read-only). */}}
{{- define "kflare.servingCertDir" -}}
{{- if .Values.webhook.certManager.enabled }}/etc/kflare/serving-certs{{ else }}/tmp/kflare/serving-certs{{ end }}
{{- end }}
{{- define "kflare.metricsCertDir" -}}/etc/kflare/metrics-certs{{- end }}

{{/* More than one controller replica can run: the PodDisruptionBudget is worth having. */}}
{{- define "kflare.multiReplica" -}}
{{- if .Values.autoscaling.enabled }}
{{- if gt (int .Values.autoscaling.maxReplicas) 1 }}true{{ end }}
{{- else if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{/*
An image reference: `image`, pinned by `digest` when one is given (`repo:tag@sha256:...`: the digest is what is
pulled, the tag says which release it was).
*/}}
{{- define "kflare.pinnedImage" -}}
{{- if .digest }}{{ printf "%s@%s" .image .digest }}{{ else }}{{ .image }}{{ end }}
{{- end }}

{{/*
The namespaces `rbac.namespaces` grants (with the release namespace, where the chart's own Secrets are), comma-
separated and sorted; empty when it grants every namespace.
*/}}
{{- define "kflare.grantedNamespaces" -}}
{{- if .Values.rbac.namespaces -}}
{{- append .Values.rbac.namespaces .Release.Namespace | uniq | sortAlpha | join "," -}}
{{- end -}}
{{- end }}
