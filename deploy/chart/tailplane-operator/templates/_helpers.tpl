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
{{- if (.Values.oauth).audience -}}
{{- fail "oauth.audience is set: Tailplane's operator does not support workload identity federation; set oauth.clientId and oauth.clientSecret, or oauthSecretVolume" -}}
{{- end -}}
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
- name: CLIENT_ID_FILE
  value: /oauth/client_id
- name: CLIENT_SECRET_FILE
  value: /oauth/client_secret
- name: OPERATOR_HOSTNAME
  value: {{ .Values.operatorConfig.hostname | quote }}
- name: OPERATOR_INITIAL_TAGS
  value: {{ join "," .Values.operatorConfig.defaultTags | quote }}
- name: OPERATOR_SECRET
  value: operator
- name: OPERATOR_LOGIN_SERVER
  value: {{ .Values.loginServer | default "" | quote }}
- name: OPERATOR_LOGGING
  value: {{ .Values.operatorConfig.logging | quote }}
- name: PROXY_IMAGE
  value: {{ include "tailplane.image" (list .Values.proxyConfig.image .Chart) | quote }}
- name: PROXY_TAGS
  value: {{ join "," .Values.proxyConfig.defaultTags | quote }}
- name: OPERATOR_INGRESS_CLASS_NAME
  value: {{ .Values.ingressClass.name | quote }}
- name: PROXY_DEFAULT_CLASS
  value: {{ .Values.proxyConfig.defaultProxyClass | default "" | quote }}
- name: OPERATOR_DEFAULT_LOAD_BALANCER
  value: "false"
- name: APISERVER_PROXY
  value: {{ toString (.Values.apiServerProxyConfig.mode | default "false") | quote }}
{{- end -}}
