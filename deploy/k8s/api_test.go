package k8s_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// The Kubernetes objects this test decodes, as small local types. Each holds
// the fields of its API type (k8s.io/api apps/v1, core/v1, networking/v1,
// policy/v1 and apimachinery's meta/v1) that the manifests use or that a
// check reads, spelled as the API's JSON field names and with the API's
// omitempty and pointers, so that an unset field stays distinct from a zero
// one. Decoding is strict: a field the manifests start to use must be added
// here, spelled as the API spells it, before the test accepts it.

// Values of the API's enumerations that the checks compare with.
const (
	strategyRecreate      = "Recreate"      // DeploymentStrategyType
	strategyRollingUpdate = "RollingUpdate" // DeploymentStrategyType
	protocolTCP           = "TCP"           // Protocol
	protocolUDP           = "UDP"           // Protocol
	seccompRuntimeDefault = "RuntimeDefault"
	resourceMemory        = "memory" // ResourceName
)

// typeMeta is meta/v1 TypeMeta, inline in every object.
type typeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// objectMeta is meta/v1 ObjectMeta.
type objectMeta struct {
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// labelSelector is meta/v1 LabelSelector.
type labelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []labelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// labelSelectorRequirement is meta/v1 LabelSelectorRequirement.
type labelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// deployment is apps/v1 Deployment.
type deployment struct {
	typeMeta
	objectMeta `json:"metadata,omitempty"`
	Spec       deploymentSpec `json:"spec,omitempty"`
}

// deploymentSpec is apps/v1 DeploymentSpec.
type deploymentSpec struct {
	Replicas             *int32             `json:"replicas,omitempty"`
	Selector             *labelSelector     `json:"selector"`
	Template             podTemplateSpec    `json:"template"`
	Strategy             deploymentStrategy `json:"strategy,omitempty"`
	RevisionHistoryLimit *int32             `json:"revisionHistoryLimit,omitempty"`
}

// deploymentStrategy is apps/v1 DeploymentStrategy.
type deploymentStrategy struct {
	Type          string                   `json:"type,omitempty"`
	RollingUpdate *rollingUpdateDeployment `json:"rollingUpdate,omitempty"`
}

// rollingUpdateDeployment is apps/v1 RollingUpdateDeployment.
type rollingUpdateDeployment struct {
	MaxUnavailable *intOrString `json:"maxUnavailable,omitempty"`
	MaxSurge       *intOrString `json:"maxSurge,omitempty"`
}

// podTemplateSpec is core/v1 PodTemplateSpec.
type podTemplateSpec struct {
	objectMeta `json:"metadata,omitempty"`
	Spec       podSpec `json:"spec,omitempty"`
}

// podSpec is core/v1 PodSpec.
type podSpec struct {
	Volumes                       []volume            `json:"volumes,omitempty"`
	InitContainers                []container         `json:"initContainers,omitempty"`
	Containers                    []container         `json:"containers"`
	TerminationGracePeriodSeconds *int64              `json:"terminationGracePeriodSeconds,omitempty"`
	ServiceAccountName            string              `json:"serviceAccountName,omitempty"`
	AutomountServiceAccountToken  *bool               `json:"automountServiceAccountToken,omitempty"`
	SecurityContext               *podSecurityContext `json:"securityContext,omitempty"`
	Affinity                      *affinity           `json:"affinity,omitempty"`
	EnableServiceLinks            *bool               `json:"enableServiceLinks,omitempty"`
}

// podSecurityContext is core/v1 PodSecurityContext.
type podSecurityContext struct {
	RunAsUser           *int64          `json:"runAsUser,omitempty"`
	RunAsGroup          *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot        *bool           `json:"runAsNonRoot,omitempty"`
	FSGroup             *int64          `json:"fsGroup,omitempty"`
	FSGroupChangePolicy *string         `json:"fsGroupChangePolicy,omitempty"`
	SeccompProfile      *seccompProfile `json:"seccompProfile,omitempty"`
}

// seccompProfile is core/v1 SeccompProfile.
type seccompProfile struct {
	Type string `json:"type"`
}

// container is core/v1 Container.
type container struct {
	Name            string               `json:"name"`
	Image           string               `json:"image,omitempty"`
	Args            []string             `json:"args,omitempty"`
	Ports           []containerPortSpec  `json:"ports,omitempty"`
	EnvFrom         []envFromSource      `json:"envFrom,omitempty"`
	Env             []envVar             `json:"env,omitempty"`
	Resources       resourceRequirements `json:"resources,omitempty"`
	VolumeMounts    []volumeMount        `json:"volumeMounts,omitempty"`
	LivenessProbe   *probe               `json:"livenessProbe,omitempty"`
	ReadinessProbe  *probe               `json:"readinessProbe,omitempty"`
	StartupProbe    *probe               `json:"startupProbe,omitempty"`
	SecurityContext *securityContext     `json:"securityContext,omitempty"`
}

// containerPortSpec is core/v1 ContainerPort.
type containerPortSpec struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

// envFromSource is core/v1 EnvFromSource.
type envFromSource struct {
	Prefix       string              `json:"prefix,omitempty"`
	ConfigMapRef *configMapEnvSource `json:"configMapRef,omitempty"`
	SecretRef    *secretEnvSource    `json:"secretRef,omitempty"`
}

// configMapEnvSource is core/v1 ConfigMapEnvSource, its
// LocalObjectReference inline.
type configMapEnvSource struct {
	Name     string `json:"name,omitempty"`
	Optional *bool  `json:"optional,omitempty"`
}

// secretEnvSource is core/v1 SecretEnvSource, its LocalObjectReference
// inline.
type secretEnvSource struct {
	Name     string `json:"name,omitempty"`
	Optional *bool  `json:"optional,omitempty"`
}

// envVar is core/v1 EnvVar.
type envVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *envVarSource `json:"valueFrom,omitempty"`
}

// envVarSource is core/v1 EnvVarSource.
type envVarSource struct {
	FieldRef        *objectFieldSelector  `json:"fieldRef,omitempty"`
	ConfigMapKeyRef *configMapKeySelector `json:"configMapKeyRef,omitempty"`
	SecretKeyRef    *secretKeySelector    `json:"secretKeyRef,omitempty"`
}

// objectFieldSelector is core/v1 ObjectFieldSelector.
type objectFieldSelector struct {
	FieldPath string `json:"fieldPath"`
}

// configMapKeySelector is core/v1 ConfigMapKeySelector, its
// LocalObjectReference inline.
type configMapKeySelector struct {
	Name     string `json:"name,omitempty"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// secretKeySelector is core/v1 SecretKeySelector, its LocalObjectReference
// inline.
type secretKeySelector struct {
	Name     string `json:"name,omitempty"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// resourceRequirements is core/v1 ResourceRequirements, and
// VolumeResourceRequirements, which has the same two fields.
type resourceRequirements struct {
	Limits   map[string]quantity `json:"limits,omitempty"`
	Requests map[string]quantity `json:"requests,omitempty"`
}

// volumeMount is core/v1 VolumeMount.
type volumeMount struct {
	Name        string `json:"name"`
	ReadOnly    bool   `json:"readOnly,omitempty"`
	MountPath   string `json:"mountPath"`
	SubPath     string `json:"subPath,omitempty"`
	SubPathExpr string `json:"subPathExpr,omitempty"`
}

// probe is core/v1 Probe, its ProbeHandler inline.
type probe struct {
	HTTPGet             *httpGetAction `json:"httpGet,omitempty"`
	InitialDelaySeconds int32          `json:"initialDelaySeconds,omitempty"`
	TimeoutSeconds      int32          `json:"timeoutSeconds,omitempty"`
	PeriodSeconds       int32          `json:"periodSeconds,omitempty"`
	FailureThreshold    int32          `json:"failureThreshold,omitempty"`
}

// httpGetAction is core/v1 HTTPGetAction.
type httpGetAction struct {
	Path   string      `json:"path,omitempty"`
	Port   intOrString `json:"port"`
	Scheme string      `json:"scheme,omitempty"`
}

// securityContext is core/v1 SecurityContext.
type securityContext struct {
	Capabilities             *capabilities   `json:"capabilities,omitempty"`
	Privileged               *bool           `json:"privileged,omitempty"`
	RunAsUser                *int64          `json:"runAsUser,omitempty"`
	RunAsGroup               *int64          `json:"runAsGroup,omitempty"`
	RunAsNonRoot             *bool           `json:"runAsNonRoot,omitempty"`
	ReadOnlyRootFilesystem   *bool           `json:"readOnlyRootFilesystem,omitempty"`
	AllowPrivilegeEscalation *bool           `json:"allowPrivilegeEscalation,omitempty"`
	SeccompProfile           *seccompProfile `json:"seccompProfile,omitempty"`
}

// capabilities is core/v1 Capabilities.
type capabilities struct {
	Add  []string `json:"add,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

// affinity is core/v1 Affinity.
type affinity struct {
	PodAntiAffinity *podAntiAffinity `json:"podAntiAffinity,omitempty"`
}

// podAntiAffinity is core/v1 PodAntiAffinity.
type podAntiAffinity struct {
	RequiredDuringSchedulingIgnoredDuringExecution  []podAffinityTerm         `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	PreferredDuringSchedulingIgnoredDuringExecution []weightedPodAffinityTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// weightedPodAffinityTerm is core/v1 WeightedPodAffinityTerm.
type weightedPodAffinityTerm struct {
	Weight          int32           `json:"weight"`
	PodAffinityTerm podAffinityTerm `json:"podAffinityTerm"`
}

// podAffinityTerm is core/v1 PodAffinityTerm.
type podAffinityTerm struct {
	LabelSelector *labelSelector `json:"labelSelector,omitempty"`
	TopologyKey   string         `json:"topologyKey"`
}

// volume is core/v1 Volume, its VolumeSource inline.
type volume struct {
	Name string `json:"name"`
	volumeSource
}

// volumeSource is core/v1 VolumeSource.
type volumeSource struct {
	EmptyDir              *emptyDirVolumeSource              `json:"emptyDir,omitempty"`
	Secret                *secretVolumeSource                `json:"secret,omitempty"`
	PersistentVolumeClaim *persistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	ConfigMap             *configMapVolumeSource             `json:"configMap,omitempty"`
}

// emptyDirVolumeSource is core/v1 EmptyDirVolumeSource.
type emptyDirVolumeSource struct {
	SizeLimit *quantity `json:"sizeLimit,omitempty"`
}

// secretVolumeSource is core/v1 SecretVolumeSource.
type secretVolumeSource struct {
	SecretName  string      `json:"secretName,omitempty"`
	Items       []keyToPath `json:"items,omitempty"`
	DefaultMode *int32      `json:"defaultMode,omitempty"`
	Optional    *bool       `json:"optional,omitempty"`
}

// persistentVolumeClaimVolumeSource is core/v1
// PersistentVolumeClaimVolumeSource.
type persistentVolumeClaimVolumeSource struct {
	ClaimName string `json:"claimName"`
}

// configMapVolumeSource is core/v1 ConfigMapVolumeSource, its
// LocalObjectReference inline.
type configMapVolumeSource struct {
	Name     string      `json:"name,omitempty"`
	Items    []keyToPath `json:"items,omitempty"`
	Optional *bool       `json:"optional,omitempty"`
}

// keyToPath is core/v1 KeyToPath.
type keyToPath struct {
	Key  string `json:"key"`
	Path string `json:"path"`
}

// configMap is core/v1 ConfigMap.
type configMap struct {
	typeMeta
	objectMeta `json:"metadata,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
}

// secret is core/v1 Secret. Data is base64 in JSON, as the API has it.
type secret struct {
	typeMeta
	objectMeta `json:"metadata,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
	StringData map[string]string `json:"stringData,omitempty"`
	Type       string            `json:"type,omitempty"`
}

// persistentVolumeClaim is core/v1 PersistentVolumeClaim.
type persistentVolumeClaim struct {
	typeMeta
	objectMeta `json:"metadata,omitempty"`
	Spec       persistentVolumeClaimSpec `json:"spec,omitempty"`
}

// persistentVolumeClaimSpec is core/v1 PersistentVolumeClaimSpec.
type persistentVolumeClaimSpec struct {
	AccessModes []string             `json:"accessModes,omitempty"`
	Resources   resourceRequirements `json:"resources,omitempty"`
}

// serviceAccount is core/v1 ServiceAccount.
type serviceAccount struct {
	typeMeta
	objectMeta                   `json:"metadata,omitempty"`
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
}

// networkPolicy is networking/v1 NetworkPolicy.
type networkPolicy struct {
	typeMeta
	objectMeta `json:"metadata,omitempty"`
	Spec       networkPolicySpec `json:"spec,omitempty"`
}

// networkPolicySpec is networking/v1 NetworkPolicySpec.
type networkPolicySpec struct {
	PodSelector labelSelector              `json:"podSelector"`
	Ingress     []networkPolicyIngressRule `json:"ingress,omitempty"`
	Egress      []networkPolicyEgressRule  `json:"egress,omitempty"`
	PolicyTypes []string                   `json:"policyTypes,omitempty"`
}

// networkPolicyIngressRule is networking/v1 NetworkPolicyIngressRule.
type networkPolicyIngressRule struct {
	Ports []networkPolicyPort `json:"ports,omitempty"`
	From  []networkPolicyPeer `json:"from,omitempty"`
}

// networkPolicyEgressRule is networking/v1 NetworkPolicyEgressRule.
type networkPolicyEgressRule struct {
	Ports []networkPolicyPort `json:"ports,omitempty"`
}

// networkPolicyPeer is networking/v1 NetworkPolicyPeer.
type networkPolicyPeer struct {
	NamespaceSelector *labelSelector `json:"namespaceSelector,omitempty"`
}

// networkPolicyPort is networking/v1 NetworkPolicyPort.
type networkPolicyPort struct {
	Protocol *string      `json:"protocol,omitempty"`
	Port     *intOrString `json:"port,omitempty"`
	EndPort  *int32       `json:"endPort,omitempty"`
}

// podDisruptionBudget is policy/v1 PodDisruptionBudget.
type podDisruptionBudget struct {
	typeMeta
	objectMeta `json:"metadata,omitempty"`
	Spec       podDisruptionBudgetSpec `json:"spec,omitempty"`
}

// podDisruptionBudgetSpec is policy/v1 PodDisruptionBudgetSpec.
type podDisruptionBudgetSpec struct {
	MinAvailable   *intOrString   `json:"minAvailable,omitempty"`
	Selector       *labelSelector `json:"selector,omitempty"`
	MaxUnavailable *intOrString   `json:"maxUnavailable,omitempty"`
}

// intOrString is apimachinery's IntOrString: a JSON number that is a 32-bit
// integer, or a string ("metrics", "25%"), as the API reads and writes it.
type intOrString struct {
	isString bool
	intVal   int32
	strVal   string
}

// parseIntOrString reads s as the API's intstr.Parse does: a 32-bit integer
// if it is one, else the string.
func parseIntOrString(s string) intOrString {
	if i, err := strconv.ParseInt(s, 10, 32); err == nil {
		return intOrString{intVal: int32(i)}
	}
	return intOrString{isString: true, strVal: s}
}

// String returns the integer in decimal, or the string.
func (v intOrString) String() string {
	if v.isString {
		return v.strVal
	}
	return strconv.Itoa(int(v.intVal))
}

// UnmarshalJSON reads a JSON string as a string and anything else as a
// 32-bit integer, as the API does.
func (v *intOrString) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		*v = intOrString{isString: true}
		return json.Unmarshal(data, &v.strVal)
	}
	*v = intOrString{}
	return json.Unmarshal(data, &v.intVal)
}

// MarshalJSON writes a number or a string, whichever v holds.
func (v intOrString) MarshalJSON() ([]byte, error) {
	if v.isString {
		return json.Marshal(v.strVal)
	}
	return json.Marshal(v.intVal)
}

// scaledValue is the API's intstr.GetScaledValueFromIntOrPercent: an integer
// as it is, a percentage ("25%") of total rounded up or down, and an error
// for any other string.
func scaledValue(v *intOrString, total int, roundUp bool) (int, error) {
	if v == nil {
		return 0, errors.New("nil value for IntOrString")
	}
	if !v.isString {
		return int(v.intVal), nil
	}
	s, ok := strings.CutSuffix(v.strVal, "%")
	if !ok {
		return 0, errors.New("invalid value for IntOrString: invalid type: string is not a percentage")
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("invalid value for IntOrString: invalid value %q: %w", v.strVal, err)
	}
	scaled := float64(n) * float64(total) / 100
	if roundUp {
		return int(math.Ceil(scaled)), nil
	}
	return int(math.Floor(scaled)), nil
}

// quantity is a resource quantity (the API's resource.Quantity) in the forms
// the manifests write: a whole number with the suffix m (thousandths), Mi
// (2^20) or Gi (2^30), always a JSON string. The API reads more forms
// (decimals, other suffixes, exponents, JSON numbers); this test refuses
// them, so that a manifest that starts to use one fails here until its
// reading is added, rather than being read wrong.
type quantity struct {
	text  string // as written, and as MarshalJSON writes it back
	milli int64  // the value in thousandths
}

// quantitySuffixes are the suffixes quantity reads, each with its value in
// thousandths.
var quantitySuffixes = []struct {
	suffix string
	milli  int64
}{
	{"m", 1},
	{"Mi", 1000 << 20},
	{"Gi", 1000 << 30},
}

// parseQuantity reads a quantity written as the manifests write them.
func parseQuantity(s string) (quantity, error) {
	for _, u := range quantitySuffixes {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok || num == "" || strings.Trim(num, "0123456789") != "" {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/u.milli {
			return quantity{}, fmt.Errorf("quantity %q is too large", s)
		}
		return quantity{text: s, milli: n * u.milli}, nil
	}
	return quantity{}, fmt.Errorf("quantity %q: want a whole number with the suffix m, Mi or Gi (other forms are beyond this test)", s)
}

// Value is the quantity rounded up to a whole number, as the API's
// Quantity.Value: bytes for a memory quantity.
func (q quantity) Value() int64 {
	v := q.milli / 1000
	if q.milli%1000 != 0 {
		v++
	}
	return v
}

// AsApproximateFloat64 is the quantity as a float64, as the API's method of
// the name.
func (q quantity) AsApproximateFloat64() float64 { return float64(q.milli) / 1000 }

// String returns the quantity as written.
func (q quantity) String() string { return q.text }

// UnmarshalJSON reads a JSON string with parseQuantity.
func (q *quantity) UnmarshalJSON(data []byte) error {
	if !bytes.HasPrefix(data, []byte(`"`)) {
		return fmt.Errorf("quantity %s: want a string such as \"256Mi\"", data)
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	parsed, err := parseQuantity(s)
	if err != nil {
		return err
	}
	*q = parsed
	return nil
}

// MarshalJSON writes the quantity as written.
func (q quantity) MarshalJSON() ([]byte, error) { return json.Marshal(q.text) }

// TestQuantity proves that quantities read as the API reads the forms the
// manifests write, and that other forms are refused rather than misread.
func TestQuantity(t *testing.T) {
	for _, tc := range []struct {
		json  string
		value int64
		float float64
	}{
		{`"256Mi"`, 256 << 20, 256 << 20},
		{`"1Gi"`, 1 << 30, 1 << 30},
		{`"200m"`, 1, 0.2},
		{`"2000m"`, 2, 2},
	} {
		var q quantity
		if err := json.Unmarshal([]byte(tc.json), &q); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if q.Value() != tc.value || q.AsApproximateFloat64() != tc.float || `"`+q.String()+`"` != tc.json {
			t.Errorf("%s: Value %d, float %g, String %q; want %d, %g and the text", tc.json, q.Value(), q.AsApproximateFloat64(), q.String(), tc.value, tc.float)
		}
	}
	for _, in := range []string{`"1G"`, `"0.5Gi"`, `"1e3"`, `"128"`, `"Mi"`, `"-1Mi"`, `""`, `256`, `"99999999999999999Gi"`} {
		var q quantity
		if err := json.Unmarshal([]byte(in), &q); err == nil {
			t.Errorf("%s: read as %d, want an error", in, q.Value())
		}
	}
}

// TestIntOrString proves that an int-or-string reads, writes and scales as
// the API's intstr does.
func TestIntOrString(t *testing.T) {
	for _, tc := range []struct {
		json, str string
		total     int
		up, down  int
		err       bool
	}{
		{json: `1`, str: "1", total: 8, up: 1, down: 1},
		{json: `"25%"`, str: "25%", total: 8, up: 2, down: 2},
		{json: `"25%"`, str: "25%", total: 3, up: 1, down: 0},
		{json: `"metrics"`, str: "metrics", err: true},
	} {
		var v intOrString
		if err := json.Unmarshal([]byte(tc.json), &v); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if out, _ := json.Marshal(v); string(out) != tc.json || v.String() != tc.str {
			t.Errorf("%s: writes %s, String %q", tc.json, out, v.String())
		}
		up, errUp := scaledValue(&v, tc.total, true)
		down, errDown := scaledValue(&v, tc.total, false)
		switch {
		case tc.err && (errUp == nil || errDown == nil):
			t.Errorf("%s: scaled to %d and %d, want an error", tc.json, up, down)
		case !tc.err && (errUp != nil || errDown != nil || up != tc.up || down != tc.down):
			t.Errorf("%s of %d: scaled %d (%v) up and %d (%v) down, want %d and %d", tc.json, tc.total, up, errUp, down, errDown, tc.up, tc.down)
		}
	}
	for _, in := range []string{`1.5`, `4294967296`, `true`} {
		var v intOrString
		if err := json.Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("%s: read as %s, want an error", in, v)
		}
	}
	if v := parseIntOrString("2"); v.isString || v.intVal != 2 {
		t.Errorf(`parseIntOrString("2") = %+v, want the integer 2`, v)
	}
	if v := parseIntOrString("50%"); !v.isString || v.strVal != "50%" {
		t.Errorf(`parseIntOrString("50%%") = %+v, want the string 50%%`, v)
	}
}
