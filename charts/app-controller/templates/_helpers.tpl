{{/* The chart's name, or nameOverride. */}}
{{- define "app-controller.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every namespaced object and of the ClusterRoles and bindings: the release
name when it holds the chart's name (helm install app-controller ...: "app-controller",
the names config/default uses), else <release>-app-controller.
*/}}
{{- define "app-controller.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "app-controller.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "app-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: app-controller
{{- end }}

{{/* Labels that select the controller's pods. */}}
{{- define "app-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "app-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* The image: repository@digest when a digest is set, else repository:tag (tag defaults to appVersion). */}}
{{- define "app-controller.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The objects of a generated multi-document file under files/ (copied there by make
generate from config/), as a list of dicts. Comment-only documents are dropped.
*/}}
{{- define "app-controller.generated" -}}
{{- $objs := list }}
{{- range regexSplit "(?m)^---[ \t]*$" (.Files.Get .file) -1 }}
{{- $obj := fromYaml . }}
{{- if $obj.kind }}
{{- $objs = append $objs $obj }}
{{- end }}
{{- end }}
{{- if not $objs }}
{{- fail (printf "%s holds no object: run make generate" .file) }}
{{- end }}
{{- toYaml (dict "items" $objs) }}
{{- end }}

{{/* The one object of kind .kind in the generated file .file. */}}
{{- define "app-controller.generatedObject" -}}
{{- $found := dict }}
{{- range (include "app-controller.generated" (dict "Files" .root.Files "file" .file) | fromYaml).items }}
{{- if eq .kind $.kind }}
{{- $found = . }}
{{- end }}
{{- end }}
{{- if not $found }}
{{- fail (printf "%s holds no %s: run make generate" .file .kind) }}
{{- end }}
{{- toYaml $found }}
{{- end }}

{{/* The namespaces of a namespace-scoped install, watchNamespaces and watchNamespace
together, as a JSON list (empty: every namespace). */}}
{{- define "app-controller.watchedNamespaces" -}}
{{- $watched := default list .Values.watchNamespaces }}
{{- with .Values.watchNamespace }}
{{- $watched = append $watched . }}
{{- end }}
{{- toJson (uniq $watched) }}
{{- end }}
