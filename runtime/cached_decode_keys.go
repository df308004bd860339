package runtime

// commonKey returns the field names most objects have as constants, so
// that the decoder allocates no string for them (a switch on string(b)
// does not copy b).
func commonKey(b []byte) (string, bool) {
	switch string(b) {
	case "apiVersion":
		return "apiVersion", true
	case "kind":
		return "kind", true
	case "metadata":
		return "metadata", true
	case "name":
		return "name", true
	case "namespace":
		return "namespace", true
	case "uid":
		return "uid", true
	case "resourceVersion":
		return "resourceVersion", true
	case "generation":
		return "generation", true
	case "creationTimestamp":
		return "creationTimestamp", true
	case "deletionTimestamp":
		return "deletionTimestamp", true
	case "labels":
		return "labels", true
	case "annotations":
		return "annotations", true
	case "finalizers":
		return "finalizers", true
	case "ownerReferences":
		return "ownerReferences", true
	case "spec":
		return "spec", true
	case "status":
		return "status", true
	case "conditions":
		return "conditions", true
	case "type":
		return "type", true
	case "reason":
		return "reason", true
	case "message":
		return "message", true
	case "lastTransitionTime":
		return "lastTransitionTime", true
	case "observedGeneration":
		return "observedGeneration", true
	case "data":
		return "data", true
	case "ports":
		return "ports", true
	case "port":
		return "port", true
	case "protocol":
		return "protocol", true
	case "targetPort":
		return "targetPort", true
	case "selector":
		return "selector", true
	}
	return "", false
}
