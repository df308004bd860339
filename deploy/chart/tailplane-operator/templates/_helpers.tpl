{{/*
tailplane.image renders repository:tag, or repository@digest when a digest is
set; an empty tag means the chart's appVersion. "repo", the official chart's
older name, wins over repository as it does there. Argument: (list $image $chart).
*/}}
{{- define "tailplane.image" -}}
{{- $image := index . 0 -}}{{- $chart := index . 1 -}}
{{- $repository := coalesce $image.repo $image.repository -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (toString ($image.tag | default $chart.AppVersion)) -}}
{{- end -}}
{{- end -}}

{{/*
tailplane.validate fails the install on values the schema cannot judge alone,
each with a message naming the value and what to do instead.
*/}}
{{- define "tailplane.validate" -}}
{{- $mode := toString (.Values.apiServerProxyConfig.mode | default "false") -}}
{{- if not (has $mode (list "true" "false" "noauth")) -}}
{{- fail (printf "apiServerProxyConfig.mode is %q: want \"true\" (the API server proxy on the operator's device, impersonating tailnet callers), \"noauth\" (forwarding the callers' own credentials) or \"false\"" $mode) -}}
{{- end -}}
{{- $imp := toString (.Values.apiServerProxyConfig.allowImpersonation | default "false") -}}
{{- if not (has $imp (list "true" "false")) -}}
{{- fail (printf "apiServerProxyConfig.allowImpersonation is %q: want \"true\" or \"false\"" $imp) -}}
{{- end -}}
{{- if and .Values.oauthSecretVolume (or (.Values.oauth).clientId (.Values.oauth).clientSecret) -}}
{{- fail "both oauth.clientId/clientSecret and oauthSecretVolume are set: set one of them (the chart creates Secret operator-oauth from the first, and mounts the second instead)" -}}
{{- end -}}
{{- if .Values.headscale.url -}}
{{- if and .Values.headscale.apiKey .Values.headscale.apiKeySecret -}}
{{- fail "both headscale.apiKey and headscale.apiKeySecret are set: set one of them (the chart creates Secret operator-headscale from the first, and mounts the second instead)" -}}
{{- end -}}
{{- if not (or .Values.headscale.apiKey .Values.headscale.apiKeySecret) -}}
{{- fail "headscale.url is set but no API key: set headscale.apiKey (from `headscale apikeys create`) or headscale.apiKeySecret (a Secret with the key api_key)" -}}
{{- end -}}
{{- if and .Values.loginServer (ne (trimSuffix "/" .Values.loginServer) (trimSuffix "/" .Values.headscale.url)) -}}
{{- fail (printf "loginServer (%s) and headscale.url (%s) differ: with Headscale, proxies log in to headscale.url; leave loginServer empty" .Values.loginServer .Values.headscale.url) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
tailplane.oauth is "true" when the operator uses the Tailscale API's OAuth
client: always, unless headscale.url is set (then only when oauth values or
oauthSecretVolume are given anyway).
*/}}
{{- define "tailplane.oauth" -}}
{{- if not (include "tailplane.federated" .) -}}
{{- if or (not .Values.headscale.url) .Values.oauthSecretVolume (.Values.oauth).clientId (.Values.oauth).clientSecret -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/*
tailplane.federated is "true" when the OAuth client is a workload identity
federation client: oauth.audience without oauth.clientSecret (which wins, as
in the official chart) or oauthSecretVolume. No client secret is then
stored: the operator's ServiceAccount token, projected for the audience,
is exchanged for API tokens.
*/}}
{{- define "tailplane.federated" -}}
{{- if and (.Values.oauth).audience (not (.Values.oauth).clientSecret) (not .Values.oauthSecretVolume) -}}true{{- end -}}
{{- end -}}

{{/*
tailplane.operatorEnv is the operator container's env, as a YAML list, before
operatorConfig.extraEnv is merged in.
*/}}
{{- define "tailplane.operatorEnv" -}}
- name: OPERATOR_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- if include "tailplane.federated" . }}
- name: CLIENT_ID
  value: {{ .Values.oauth.clientId | quote }}
{{- else }}
- name: CLIENT_ID_FILE
  value: /oauth/client_id
- name: CLIENT_SECRET_FILE
  value: /oauth/client_secret
{{- end }}
- name: OPERATOR_HOSTNAME
  value: {{ .Values.operatorConfig.hostname | quote }}
- name: OPERATOR_INITIAL_TAGS
  value: {{ join "," .Values.operatorConfig.defaultTags | quote }}
- name: OPERATOR_SECRET
  value: operator
- name: OPERATOR_LOGIN_SERVER
  value: {{ .Values.loginServer | default "" | quote }}
{{- if .Values.headscale.url }}
- name: HEADSCALE_URL
  value: {{ .Values.headscale.url | quote }}
- name: HEADSCALE_API_KEY_FILE
  value: /headscale/api_key
- name: HEADSCALE_USER
  value: {{ .Values.headscale.user | default "tailplane" | quote }}
{{- end }}
- name: OPERATOR_LOGGING
  value: {{ .Values.operatorConfig.logging | quote }}
- name: OPERATOR_ADOPT_OFFICIAL
  value: {{ .Values.operatorConfig.adoptOfficial | default "on" | quote }}
{{- if .Values.operatorConfig.handBack }}
- name: OPERATOR_HAND_BACK
  value: "true"
{{- end }}
- name: PROXY_IMAGE
  value: {{ include "tailplane.image" (list .Values.proxyConfig.image .Chart) | quote }}
- name: PROXY_TAGS
  value: {{ join "," .Values.proxyConfig.defaultTags | quote }}
- name: OPERATOR_INGRESS_CLASS_NAME
  value: {{ .Values.ingressClass.name | quote }}
{{- if .Values.gatewayAPI.gatewayClass.create }}
- name: OPERATOR_GATEWAY_CLASS_NAME
  value: {{ .Values.gatewayAPI.gatewayClass.name | quote }}
{{- end }}
- name: PROXY_DEFAULT_CLASS
  value: {{ .Values.proxyConfig.defaultProxyClass | default "" | quote }}
{{- /* PROXY_ACME_* for the proxies; the TS_ and SSL_ names for the operator's
own device, which serves the API server proxy with a certificate. */}}
{{- with .Values.proxyConfig.acmeDirectoryURL }}
- name: PROXY_ACME_DIRECTORY_URL
  value: {{ . | quote }}
- name: TS_DEBUG_ACME_DIRECTORY_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.proxyConfig.acmeCAFile }}
- name: PROXY_ACME_CA_FILE
  value: {{ . | quote }}
- name: SSL_CERT_FILE
  value: {{ . | quote }}
{{- end }}
- name: OPERATOR_DEFAULT_LOAD_BALANCER
  value: "false"
- name: APISERVER_PROXY
  value: {{ toString (.Values.apiServerProxyConfig.mode | default "false") | quote }}
{{- end -}}

{{/*
tailplane.operatorEnvMerged is the operator container's env with
operatorConfig.extraEnv merged in (it replaces a variable of the same name).
*/}}
{{- define "tailplane.operatorEnvMerged" -}}
{{- $extra := list }}
{{- range .Values.operatorConfig.extraEnv }}{{ $extra = append $extra .name }}{{ end }}
{{- range include "tailplane.operatorEnv" . | fromYamlArray }}
{{- if not (has .name $extra) }}
- {{ toYaml . | indent 2 | trim }}
{{- end }}
{{- end }}
{{- with .Values.operatorConfig.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /*
The names of the Gateway API experimental channel's CRDs, as the operator
image embeds them (internal/gatewayapicrds; a test keeps the two equal).
*/ -}}
{{- define "tailplane.gatewayAPIExperimentalCRDs" -}}
- backendtlspolicies.gateway.networking.k8s.io
- gatewayclasses.gateway.networking.k8s.io
- gateways.gateway.networking.k8s.io
- grpcroutes.gateway.networking.k8s.io
- httproutes.gateway.networking.k8s.io
- listenersets.gateway.networking.k8s.io
- referencegrants.gateway.networking.k8s.io
- tcproutes.gateway.networking.k8s.io
- tlsroutes.gateway.networking.k8s.io
- udproutes.gateway.networking.k8s.io
- xbackends.gateway.networking.x-k8s.io
- xbackendtrafficpolicies.gateway.networking.x-k8s.io
- xmeshes.gateway.networking.x-k8s.io
{{- end }}
