package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Recorder runs tsrecorder, which records tailnet SSH sessions, on the
// tailnet. Tailplane accepts Recorders so that manifests written for the
// official operator apply, but does not run them yet: it says so in the
// RecorderReady condition.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rec
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=`.status.conditions[?(@.type == "RecorderReady")].reason`,description="Why the Recorder is or is not ready."
// +kubebuilder:printcolumn:name="URL",type="string",JSONPath=`.status.devices[?(@.url != "")].url`,description="URL of the recordings UI, when enabled."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Recorder struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The recorder wanted.
	Spec RecorderSpec `json:"spec"`

	// What the operator observed of the recorder.
	// +optional
	Status RecorderStatus `json:"status"`
}

// RecorderList is a list of Recorders.
//
// +kubebuilder:object:root=true
type RecorderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []Recorder `json:"items"`
}

// RecorderSpec is the wanted recorder.
//
// +kubebuilder:validation:XValidation:rule="!(self.replicas > 1 && (!has(self.storage) || !has(self.storage.s3)))",message="S3 storage must be used when deploying multiple Recorder replicas"
type RecorderSpec struct {
	// Settings of the recorder's StatefulSet.
	// +optional
	StatefulSet RecorderStatefulSet `json:"statefulSet,omitempty"`

	// ACL tags of the recorder's devices; tag:k8s when empty.
	// +optional
	Tags Tags `json:"tags,omitempty"`

	// Serve a UI that lists and plays the recordings on port 443 of the
	// device. Needed when no S3 storage is set.
	// +optional
	EnableUI bool `json:"enableUI,omitempty"`

	// Where recordings are kept; a volume that lives as long as the Pod
	// when unset.
	// +optional
	Storage Storage `json:"storage,omitempty"`

	// Number of recorders.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=1
	Replicas *int32 `json:"replicas,omitempty"`

	// Name of the Tailnet object whose tailnet the recorder joins; the
	// operator's own when empty. Fixed at creation.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Recorder tailnet is immutable"
	Tailnet string `json:"tailnet,omitempty"`
}

// RecorderStatefulSet holds settings of a recorder's StatefulSet.
type RecorderStatefulSet struct {
	// Labels added to the StatefulSet.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the StatefulSet.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Settings of the recorder's Pods.
	// +optional
	Pod RecorderPod `json:"pod,omitempty"`
}

// RecorderPod holds settings of a recorder's Pods.
type RecorderPod struct {
	// Labels added to the Pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the Pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Scheduling affinity of the Pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Settings of the recorder container.
	// +optional
	Container RecorderContainer `json:"container,omitempty"`

	// Pod-level security context.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// Secrets used to pull the image.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Node labels the Pods must be scheduled on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Taints the Pods tolerate.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// The ServiceAccount the Pods run as.
	// +optional
	ServiceAccount RecorderServiceAccount `json:"serviceAccount,omitempty"`
}

// RecorderServiceAccount is the ServiceAccount of a recorder's Pods.
type RecorderServiceAccount struct {
	// Name of the ServiceAccount; the Recorder's name when empty.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-.]{0,61}[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`

	// Annotations of the ServiceAccount (an IAM role for S3 access, say).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RecorderContainer holds settings of the recorder container.
type RecorderContainer struct {
	// Extra environment variables.
	// +optional
	Env []Env `json:"env,omitempty"`

	// Container image.
	// +optional
	Image string `json:"image,omitempty"`

	// When to pull the image: Always, Never or IfNotPresent.
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// CPU and memory requests and limits.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Container security context.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// Storage is where a recorder keeps recordings.
type Storage struct {
	// An S3-compatible bucket. Needed when the UI is not enabled.
	// +optional
	S3 *S3 `json:"s3,omitempty"`
}

// S3 is an S3-compatible bucket for recordings.
type S3 struct {
	// Endpoint of the S3 API, such as s3.eu-west-1.amazonaws.com.
	Endpoint string `json:"endpoint,omitempty"`

	// Bucket to write recordings to, used for nothing else.
	Bucket string `json:"bucket,omitempty"`

	// Credentials for the bucket; from the environment, files or STS when
	// unset.
	// +optional
	Credentials S3Credentials `json:"credentials,omitempty"`
}

// S3Credentials holds credentials for an S3 bucket.
type S3Credentials struct {
	// A Secret whose keys become the container's environment variables.
	// +optional
	Secret S3Secret `json:"secret,omitempty"`
}

// S3Secret names a Secret of S3 credentials.
type S3Secret struct {
	// Name of a Secret in the operator's namespace, with keys such as
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	// +optional
	Name string `json:"name,omitempty"`
}

// RecorderStatus is what the operator observed of a Recorder.
type RecorderStatus struct {
	// RecorderReady and its reason.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// The recorder's tailnet devices.
	// +listType=map
	// +listMapKey=hostname
	// +optional
	Devices []RecorderTailnetDevice `json:"devices,omitempty"`
}

// RecorderTailnetDevice is one device of a recorder.
type RecorderTailnetDevice struct {
	// MagicDNS name of the device.
	Hostname string `json:"hostname"`

	// Tailnet addresses of the device.
	// +optional
	TailnetIPs []string `json:"tailnetIPs,omitempty"`

	// HTTPS URL of the UI, when enabled.
	// +optional
	URL string `json:"url,omitempty"`
}

// RecorderReady is the condition type of a Recorder.
const RecorderReady = "RecorderReady"
