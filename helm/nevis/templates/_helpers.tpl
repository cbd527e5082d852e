{{/* Chart name, truncated to a DNS label. */}}
{{- define "nevis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every resource name. */}}
{{- define "nevis.fullname" -}}
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

{{/* Labels every object carries. */}}
{{- define "nevis.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nevis
{{- end }}

{{/* Selector labels of one component: (dict "ctx" $ "component" "coordinator"). */}}
{{- define "nevis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nevis.name" .ctx }}-{{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end }}

{{/* An image reference from {repository, tag, digest}: the digest wins. */}}
{{- define "nevis.image" -}}
{{- if .digest }}
{{- printf "%s@%s" .repository .digest }}
{{- else }}
{{- printf "%s:%s" .repository (toString .tag) }}
{{- end }}
{{- end }}

{{/* Namespace of the kuberay backend's RayJobs. */}}
{{- define "nevis.kuberayNamespace" -}}
{{- default .Release.Namespace .Values.kuberay.namespace }}
{{- end }}

{{- define "nevis.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-coordinator" (include "nevis.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nevis.rayClusterName" -}}
{{- printf "%s-ray" (include "nevis.fullname" .) | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/* The container security context of every container: no privilege, no capability. */}}
{{- define "nevis.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: {{ . }}
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* What a pod that starts learner hosts (bubblewrap) needs at pod level: its own user
namespace (values: learnerSandbox). Rendered into the pod spec. */}}
{{- define "nevis.learnerPod" -}}
hostUsers: {{ .Values.learnerSandbox.hostUsers }}
{{- end }}

{{/* The container security context of a container that starts learner hosts: the shared one
plus an unmasked /proc and the seccomp (and AppArmor) profile that let bubblewrap make its
namespaces. Takes (dict "ctx" $ "ro" readOnlyRootFilesystem). */}}
{{- define "nevis.learnerContainerSecurity" -}}
{{ include "nevis.containerSecurity" .ro }}
{{- with .ctx.Values.learnerSandbox }}
procMount: {{ .procMount }}
seccompProfile:
  type: {{ .seccompProfile.type }}
  {{- if eq .seccompProfile.type "Localhost" }}
  localhostProfile: {{ .seccompProfile.localhostProfile }}
  {{- end }}
{{- with .appArmorProfile }}
appArmorProfile:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/* Environment sources of the service's processes: the ConfigMap, then the Secret. */}}
{{- define "nevis.envFrom" -}}
- configMapRef:
    name: {{ include "nevis.fullname" . }}-config
- secretRef:
    name: {{ required "existingSecret must name an existing Secret" .Values.existingSecret }}
{{- end }}

{{/* HOME and scratch space on a read-only root filesystem. */}}
{{- define "nevis.scratchEnv" -}}
- name: HOME
  value: /tmp
{{- end }}

{{- define "nevis.pullSecrets" -}}
{{- with .Values.images.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of one component's objects: the common ones plus its name. */}}
{{- define "nevis.componentLabels" -}}
{{ include "nevis.labels" .ctx }}
app.kubernetes.io/name: {{ include "nevis.name" .ctx }}-{{ .component }}
{{- end }}
