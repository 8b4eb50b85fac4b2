{{/*
The chart's name, cut to 63 characters (the label value limit).
*/}}
{{- define "karpenter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fullname of every object: fullnameOverride, else the release name when
it already contains the chart's name, else release-chart.
*/}}
{{- define "karpenter.fullname" -}}
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

{{- define "karpenter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "karpenter.labels" -}}
helm.sh/chart: {{ include "karpenter.chart" . }}
{{ include "karpenter.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels that select the controller's pods (Deployment, PDB, Service, spread
and anti-affinity): they must not change across upgrades.
*/}}
{{- define "karpenter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The controller image: repository:tag, or repository:tag@digest when a digest
is given. The tag defaults to the chart's appVersion.
*/}}
{{- define "karpenter.controller.image" -}}
{{- $tag := .Values.controller.image.tag | default .Chart.AppVersion }}
{{- if .Values.controller.image.digest }}
{{- printf "%s:%s@%s" .Values.controller.image.repository $tag .Values.controller.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.controller.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
FEATURE_GATES from settings.featureGates, in a fixed order so that the
rendered manifest does not change between runs.
*/}}
{{- define "karpenter.featureGates" -}}
{{- $g := .Values.settings.featureGates }}
{{- $pairs := list }}
{{- range $k := list "NodeRepair" "ReservedCapacity" "SpotToSpotConsolidation" "NodeOverlay" "StaticCapacity" "CapacityBuffer" }}
{{- $v := index $g (untitle $k) }}
{{- if kindIs "invalid" $v }}{{ fail (printf "settings.featureGates.%s must be set" (untitle $k)) }}{{ end }}
{{- $pairs = append $pairs (printf "%s=%t" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
A pod (anti-)affinity term or spread constraint without a labelSelector gets
the chart's selector labels, so the default "one per host / per zone" rules
apply to the controller's own pods.
*/}}
{{- define "karpenter.withSelector" -}}
{{- $root := index . 0 }}
{{- $out := list }}
{{- range index . 1 }}
{{- $t := deepCopy . }}
{{- if not (hasKey $t "labelSelector") }}
{{- $_ := set $t "labelSelector" (dict "matchLabels" (include "karpenter.selectorLabels" $root | fromYaml)) }}
{{- end }}
{{- $out = append $out $t }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{- define "karpenter.withSelectorWeighted" -}}
{{- $root := index . 0 }}
{{- $out := list }}
{{- range index . 1 }}
{{- $t := deepCopy . }}
{{- if and (hasKey $t "podAffinityTerm") (not (hasKey $t.podAffinityTerm "labelSelector")) }}
{{- $_ := set $t.podAffinityTerm "labelSelector" (dict "matchLabels" (include "karpenter.selectorLabels" $root | fromYaml)) }}
{{- end }}
{{- $out = append $out $t }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The pod's affinity: node affinity as given, pod (anti-)affinity terms with
the selector filled in.
*/}}
{{- define "karpenter.affinity" -}}
{{- $root := . }}
{{- $a := .Values.affinity }}
{{- with $a.nodeAffinity }}
nodeAffinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- with index $a $kind }}
{{ $kind }}:
  {{- with .requiredDuringSchedulingIgnoredDuringExecution }}
  requiredDuringSchedulingIgnoredDuringExecution:
    {{- include "karpenter.withSelector" (list $root .) | nindent 4 }}
  {{- end }}
  {{- with .preferredDuringSchedulingIgnoredDuringExecution }}
  preferredDuringSchedulingIgnoredDuringExecution:
    {{- include "karpenter.withSelectorWeighted" (list $root .) | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The controller container's securityContext: the hardened default with each
field the user sets in controller.securityContext replacing the default's
field of that name. Fields left empty ({} or "", as upstream's values file
ships appArmorProfile, seLinuxOptions and seccompProfile) are dropped: the
API server rejects an appArmorProfile without a type. false and 0 are kept
(readOnlyRootFilesystem: false must win over the default's true), which is
why this is a loop over set and not sprig's merge, which overwrites false.
*/}}
{{- define "karpenter.controller.securityContext" -}}
{{- $sc := dict "runAsUser" 65532 "runAsGroup" 65532 "runAsNonRoot" true "privileged" false "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") }}
{{- range $k, $v := .Values.controller.securityContext | default dict }}
{{- if or (kindIs "bool" $v) (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v) (not (empty $v)) }}
{{- $_ := set $sc $k $v }}
{{- end }}
{{- end }}
{{- toYaml $sc }}
{{- end }}

{{/*
A setting's value after tpl, so that an umbrella chart can pass
"{{ .Values.global.clusterName }}"; nil renders as "".
*/}}
{{- define "karpenter.setting" -}}
{{- $v := index . 1 }}
{{- if kindIs "invalid" $v }}{{ $v = "" }}{{ end }}
{{- tpl (toString $v) (index . 0) }}
{{- end }}
