{{- define "gpu2dra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpu2dra.fullname" -}}
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

{{- define "gpu2dra.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpu2dra.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu2dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "gpu2dra.labels" -}}
helm.sh/chart: {{ include "gpu2dra.chart" . }}
{{ include "gpu2dra.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpu2dra.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpu2dra.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gpu2dra.tlsSecretName" -}}
{{- if eq .Values.tls.mode "secret" }}
{{- required "tls.secretName is required with tls.mode=secret" .Values.tls.secretName }}
{{- else }}
{{- default (printf "%s-tls" (include "gpu2dra.fullname" .)) .Values.tls.secretName }}
{{- end }}
{{- end }}

{{/* The image: [registry/]repository, then @digest when one is set, else :tag (the chart's
appVersion by default). */}}
{{- define "gpu2dra.image" -}}
{{- $repository := .Values.image.repository }}
{{- with .Values.image.registry }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The policy as the chart reads it, as JSON: the `policy` values over the two keys of
gpu2dra's embedded default policy (DEFAULT_POLICY_YAML in app/core/policy.py) that the
webhook configurations depend on. Key by key, as the server fills a policy file: a
`mappings` given replaces the default's. tests/chart checks these against the server's. */}}
{{- define "gpu2dra.policy" -}}
{{- $embedded := dict "defaultMode" "disabled" "mappings" (dict "nvidia.com/gpu" (dict) "nvidia.com/mig-*" (dict)) }}
{{- $policy := deepCopy (.Values.policy | default dict) }}
{{- range $key, $value := $embedded }}
{{- if not (hasKey $policy $key) }}
{{- $_ := set $policy $key $value }}
{{- end }}
{{- end }}
{{- toJson $policy }}
{{- end }}

{{/* The CA, certificate and key of tls.mode=helm, as JSON, and when an upgrade renews them
(renewAfter, Unix seconds): those of the existing Secret while its gpu2dra.io/renew-after is
in the future (an upgrade), else new ones (an install, an upgrade past renew-after, a Secret
of an older chart without it, or `helm template`, where lookup finds nothing). A renewal
keeps the old CA after the new one in ca.crt, the webhooks' caBundle: replicas still serving
the old certificate until the kubelet updates their Secret volume keep answering; the next
renewal drops it. Made once per render and kept in the root context, so that the Secret and
both webhook configurations carry the same CA. */}}
{{- define "gpu2dra.helmTLS" -}}
{{- if not (hasKey . "gpu2draHelmTLS") }}
{{- $secretName := include "gpu2dra.tlsSecretName" . }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName }}
{{- $tls := dict }}
{{- $oldCA := "" }}
{{- $renewAfter := 0 }}
{{- if and $existing $existing.data (index $existing.data "ca.crt") }}
{{- $oldCA = index $existing.data "ca.crt" }}
{{- $annotations := $existing.metadata.annotations | default dict }}
{{- $renewAfter = int64 (index $annotations "gpu2dra.io/renew-after" | default "0") }}
{{- end }}
{{- if and $oldCA (gt $renewAfter (now | unixEpoch | int64)) }}
{{- $_ := set $tls "ca" $oldCA }}
{{- $_ := set $tls "crt" (index $existing.data "tls.crt") }}
{{- $_ := set $tls "key" (index $existing.data "tls.key") }}
{{- $_ := set $tls "renewAfter" (toString $renewAfter) }}
{{- else }}
{{- $fullname := include "gpu2dra.fullname" . }}
{{- $dns := list $fullname (printf "%s.%s" $fullname .Release.Namespace) (printf "%s.%s.svc" $fullname .Release.Namespace) }}
{{- $days := int .Values.tls.validityDays }}
{{- /* ECDSA P-256, not helm's default RSA 2048: the API server opens a connection, and
gpu2dra answers a handshake, for every webhook call beyond its 25 idle ones in a burst; an
ECDSA handshake costs gpu2dra half the CPU (docs/performance.md). */}}
{{- $ca := genCAWithKey "gpu2dra-ca" $days (genPrivateKey "ecdsa") }}
{{- $cert := genSignedCertWithKey $fullname nil $dns $days $ca (genPrivateKey "ecdsa") }}
{{- $bundle := $ca.Cert }}
{{- with $oldCA }}
{{- $bundle = printf "%s\n%s\n" (trimSuffix "\n" $ca.Cert) (regexFind "(?s)-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----" (b64dec .)) }}
{{- end }}
{{- $_ := set $tls "ca" ($bundle | b64enc) }}
{{- $_ := set $tls "crt" ($cert.Cert | b64enc) }}
{{- $_ := set $tls "key" ($cert.Key | b64enc) }}
{{- $renewIn := mul (sub $days (int .Values.tls.renewBeforeDays)) 86400 }}
{{- $_ := set $tls "renewAfter" (toString (add (now | unixEpoch) $renewIn)) }}
{{- end }}
{{- $_ := set . "gpu2draHelmTLS" $tls }}
{{- end }}
{{- toJson (get . "gpu2draHelmTLS") }}
{{- end }}

{{/* The caBundle of the webhook configurations: the chart's CA (helm), yours (secret), or
none (cert-manager injects it). */}}
{{- define "gpu2dra.caBundle" -}}
{{- if eq .Values.tls.mode "helm" }}
{{- (include "gpu2dra.helmTLS" . | fromJson).ca }}
{{- else if eq .Values.tls.mode "secret" }}
{{- required "tls.caBundle is required with tls.mode=secret" .Values.tls.caBundle }}
{{- end }}
{{- end }}

{{/* Annotations of both webhook configurations. */}}
{{- define "gpu2dra.webhookAnnotations" -}}
{{- $annotations := deepCopy (.Values.webhook.annotations | default dict) }}
{{- if eq .Values.tls.mode "cert-manager" }}
{{- $_ := set $annotations "cert-manager.io/inject-ca-from" (printf "%s/%s" .Release.Namespace (include "gpu2dra.certificateName" .)) }}
{{- end }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "gpu2dra.certificateName" -}}
{{- printf "%s-serving" (include "gpu2dra.fullname" .) }}
{{- end }}

{{/* Namespaces whose requests reach gpu2dra: opted in by label (or, when the policy's
default mode is not disabled, every namespace not opted out), never kube-system or the
release namespace. */}}
{{- define "gpu2dra.namespaceSelector" -}}
matchExpressions:
  - key: gpu2dra.io/migration
    {{- if eq (include "gpu2dra.policy" . | fromJson).defaultMode "disabled" }}
    operator: In
    values: [enabled, audit]
    {{- else }}
    operator: NotIn
    values: [disabled]
    {{- end }}
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- range uniq (concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces) }}
      - {{ . | quote }}
      {{- end }}
{{- end }}

{{/* Only pods that ask for a mapped resource are sent: the rest never pay the round trip. */}}
{{- define "gpu2dra.gpuResourceCondition" -}}
{{- $quoted := list }}
{{- range $resource, $_ := (include "gpu2dra.policy" . | fromJson).mappings }}
{{- $quoted = append $quoted (printf "'%s'" (trimSuffix "*" $resource)) }}
{{- end }}
{{- $has := printf "[%s].exists(p, k.startsWith(p))" (join ", " $quoted) -}}
{{- $c := printf "has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, %s)) || (has(c.resources.requests) && c.resources.requests.exists(k, %s)))" $has $has -}}
object.spec.containers.exists(c, {{ $c }}) || (has(object.spec.initContainers) && object.spec.initContainers.exists(c, {{ $c }}))
{{- end }}

{{- define "gpu2dra.clientConfig" -}}
{{- $path := .path }}
{{- with .root }}
{{- if .Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" .Values.webhook.url) $path | quote }}
{{- else }}
service:
  name: {{ include "gpu2dra.fullname" . }}
  namespace: {{ .Release.Namespace }}
  path: {{ $path }}
  port: {{ .Values.service.port }}
{{- end }}
{{- end }}
{{- end }}

{{/* The exporter's labels: the chart's, with component exporter (the webhook's Service and
PodDisruptionBudget select component webhook only). */}}
{{- define "gpu2dra.exporterSelectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu2dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: exporter
{{- end }}

{{- define "gpu2dra.exporterLabels" -}}
helm.sh/chart: {{ include "gpu2dra.chart" . }}
{{ include "gpu2dra.exporterSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels of the `helm test` objects: the chart's, with component test (the webhook's
Service and PodDisruptionBudget select component webhook only). */}}
{{- define "gpu2dra.testLabels" -}}
helm.sh/chart: {{ include "gpu2dra.chart" . }}
app.kubernetes.io/name: {{ include "gpu2dra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: test
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
