{{/* The chart's name. */}}
{{- define "vigil.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the prefix of every object's name. */}}
{{- define "vigil.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vigil.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vigil.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vigil.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vigil.labels" -}}
helm.sh/chart: {{ include "vigil.chart" . }}
{{ include "vigil.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "vigil.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vigil.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "vigil.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Fails the render on a mode other than single or cluster. */}}
{{- define "vigil.cluster" -}}
{{- if eq .Values.mode "cluster" -}}true
{{- else if ne .Values.mode "single" -}}
{{- fail (printf "mode must be single or cluster, not %q" .Values.mode) -}}
{{- end -}}
{{- end -}}

{{- define "vigil.postgresSecretName" -}}
{{- default (printf "%s-postgres" (include "vigil.fullname" .)) .Values.postgres.existingSecret -}}
{{- end -}}

{{- define "vigil.clusterSecretName" -}}
{{- default (printf "%s-cluster" (include "vigil.fullname" .)) .Values.clusterSecret.existingSecret -}}
{{- end -}}

{{/* The HTTP probes' scheme: the HTTP port serves TLS when tls.enabled. */}}
{{- define "vigil.httpScheme" -}}
{{- if .Values.tls.enabled -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}
