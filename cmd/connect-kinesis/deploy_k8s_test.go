package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"
)

// k8sKinds are the API types the manifests may hold, by apiVersion/kind.
var k8sKinds = map[string]func() any{
	"v1/ServiceAccount":                      func() any { return &corev1.ServiceAccount{} },
	"v1/Secret":                              func() any { return &corev1.Secret{} },
	"v1/ConfigMap":                           func() any { return &corev1.ConfigMap{} },
	"v1/Service":                             func() any { return &corev1.Service{} },
	"apps/v1/Deployment":                     func() any { return &appsv1.Deployment{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
}

// decodeK8s decodes one manifest document into the API type its
// apiVersion and kind name, refusing any field the type does not have (a
// misspelt or misplaced field the API server would drop or refuse).
func decodeK8s(doc string) (any, error) {
	var tm metav1.TypeMeta
	if err := sigsyaml.Unmarshal([]byte(doc), &tm); err != nil {
		return nil, err
	}
	newObj, ok := k8sKinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, &unknownKindError{tm.APIVersion + "/" + tm.Kind}
	}
	obj := newObj()
	return obj, sigsyaml.UnmarshalStrict([]byte(doc), obj)
}

type unknownKindError struct{ kind string }

func (e *unknownKindError) Error() string { return "no API type known for " + e.kind }

// k8sObjects decodes every document of a manifest file, keyed by
// Kind/name.
func k8sObjects(t *testing.T, file string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, file))
	require.NoError(t, err)
	out := map[string]any{}
	for i, doc := range splitYAMLDocs(string(raw)) {
		obj, err := decodeK8s(doc)
		require.NoError(t, err, "%s document %d against the Kubernetes API types", file, i+1)
		var meta struct {
			Kind     string
			Metadata struct{ Name string }
		}
		require.NoError(t, sigsyaml.Unmarshal([]byte(doc), &meta))
		require.NotEmpty(t, meta.Metadata.Name, "%s document %d has a name", file, i+1)
		out[meta.Kind+"/"+meta.Metadata.Name] = obj
	}
	return out
}

// makeVar reads a `NAME := value` line of the Makefile.
func makeVar(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + name + `\s*:?=\s*(\S+)`).FindStringSubmatch(string(raw))
	require.NotNil(t, m, "the Makefile sets %s", name)
	return m[1]
}

// imageUser is the uid:gid of the Containerfile's USER.
func imageUser(t *testing.T) (int64, int64) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "Containerfile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^USER (\d+):(\d+)$`).FindStringSubmatch(string(raw))
	require.NotNil(t, m, "the Containerfile sets a numeric USER uid:gid")
	uid, _ := strconv.ParseInt(m[1], 10, 64)
	gid, _ := strconv.ParseInt(m[2], 10, 64)
	return uid, gid
}

// Strict decoding is what catches a misspelt field: the test below would
// pass on a manifest with one otherwise.
func TestDecodeK8sRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"misspelt probe": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n        - name: x\n          readinesProbe: {httpGet: {path: /ready, port: http}}\n",
		"misplaced":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nspec: {}\n",
		"unknown kind":   "apiVersion: apps/v1\nkind: Deploymint\nmetadata: {name: x}\n",
	} {
		_, err := decodeK8s(doc)
		assert.Error(t, err, name)
	}
}

// The Kubernetes manifest decodes strictly into the API types, runs the
// image `make image` tags as the image's non-root user with a read-only
// root filesystem, probes the Benthos HTTP server's /ping and /ready on the
// port the pipeline serves, and has memory for the input's buffer.
func TestDeployManifestsStrict(t *testing.T) {
	t.Parallel()
	objs := k8sObjects(t, "kubernetes.yaml")
	for _, want := range []string{"ServiceAccount/connect-kinesis", "Secret/connect-kinesis", "ConfigMap/connect-kinesis",
		"Deployment/connect-kinesis", "Deployment/connect-kinesis-redis", "Service/connect-kinesis-redis"} {
		require.Contains(t, objs, want)
	}
	d := objs["Deployment/connect-kinesis"].(*appsv1.Deployment)
	// A rolling update replaces one copy at a time, without a surge pod
	// (the comment above the strategy says why).
	if ru := d.Spec.Strategy.RollingUpdate; assert.NotNil(t, ru) && assert.NotNil(t, ru.MaxSurge) && assert.NotNil(t, ru.MaxUnavailable) {
		assert.Equal(t, "0", ru.MaxSurge.String())
		assert.Equal(t, "1", ru.MaxUnavailable.String())
	}
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]

	assert.Equal(t, makeVar(t, "IMAGE")+":latest", c.Image, "the image `make image` tags")
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy, "a local image is not pulled")
	assert.Empty(t, c.Command, "the image's entrypoint runs")
	assert.Empty(t, c.Args, "the image's command (run /etc/connect-kinesis/pipeline.yaml) runs")
	require.Len(t, c.VolumeMounts, 1)
	assert.Equal(t, "/etc/connect-kinesis", c.VolumeMounts[0].MountPath, "the ConfigMap's pipeline.yaml is where the image's command reads it")

	// Probes: the pipeline's HTTP server, by the port's name.
	var conf struct {
		HTTP struct{ Address string }
	}
	require.NoError(t, sigsyaml.Unmarshal([]byte(objs["ConfigMap/connect-kinesis"].(*corev1.ConfigMap).Data["pipeline.yaml"]), &conf))
	_, port, _ := strings.Cut(conf.HTTP.Address, ":")
	require.Len(t, c.Ports, 1)
	assert.Equal(t, port, strconv.Itoa(int(c.Ports[0].ContainerPort)), "the container port is the pipeline's http.address")
	for probe, path := range map[*corev1.Probe]string{c.ReadinessProbe: "/ready", c.LivenessProbe: "/ping"} {
		require.NotNil(t, probe)
		require.NotNil(t, probe.HTTPGet, "%s is an HTTP probe", path)
		assert.Equal(t, path, probe.HTTPGet.Path)
		assert.Equal(t, intstr.FromString(c.Ports[0].Name), probe.HTTPGet.Port)
	}

	uid, gid := imageUser(t)
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, new(true), pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, &uid, pod.SecurityContext.RunAsUser, "the image's user")
	assert.Equal(t, &gid, pod.SecurityContext.RunAsGroup)
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, new(true), c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, new(false), c.SecurityContext.AllowPrivilegeEscalation)
	require.NotNil(t, c.SecurityContext.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)

	// Memory: a 512Mi limit, with the input's default buffer
	// (max_buffered_bytes: a quarter of GOMEMLIMIT) within it; requested in full, so the
	// pod is not placed where that memory is not there; GOMEMLIMIT below it.
	limit := c.Resources.Limits[corev1.ResourceMemory]
	assert.Equal(t, resource.MustParse("512Mi"), limit)
	request := c.Resources.Requests[corev1.ResourceMemory]
	assert.Zero(t, request.Cmp(limit), "memory requested is the limit")
	var gomemlimit string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gomemlimit = e.Value
		}
	}
	soft, err := resource.ParseQuantity(strings.TrimSuffix(gomemlimit, "B"))
	require.NoError(t, err, "GOMEMLIMIT %q", gomemlimit)
	assert.Less(t, soft.Value(), limit.Value(), "GOMEMLIMIT is below the limit")
	assert.Greater(t, soft.Value(), limit.Value()*8/10, "GOMEMLIMIT leaves the heap most of the limit")
}

// kedaPrometheusMetadata are the trigger metadata keys KEDA's Prometheus
// scaler reads (pkg/scalers/prometheus_scaler.go of KEDA v2.21.0, its
// `keda:"name=..."` tags; https://keda.sh/docs/latest/scalers/prometheus/).
// The CRD leaves metadata free-form, so a misspelt key would only surface as
// a scaler error at run time.
var kedaPrometheusMetadata = []string{"serverAddress", "query", "queryParameters", "threshold", "activationThreshold",
	"namespace", "customHeaders", "ignoreNullValues", "unsafeSsl", "awsRegion", "timeout", "identityOwner"}

// adapterConfig is prometheus-adapter's configuration file, the fields its
// docs/config.md documents (MetricsDiscoveryConfig).
type adapterConfig struct {
	Rules         []adapterRule `json:"rules,omitempty"`
	ExternalRules []adapterRule `json:"externalRules,omitempty"`
}

type adapterRule struct {
	SeriesQuery   string `json:"seriesQuery"`
	SeriesFilters []struct {
		Is    string `json:"is,omitempty"`
		IsNot string `json:"isNot,omitempty"`
	} `json:"seriesFilters,omitempty"`
	Resources struct {
		Template  string `json:"template,omitempty"`
		Overrides map[string]struct {
			Group    string `json:"group,omitempty"`
			Resource string `json:"resource"`
		} `json:"overrides,omitempty"`
		Namespaced *bool `json:"namespaced,omitempty"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

// scaledObject reads config/deploy/autoscaling-keda.yaml as JSON.
func scaledObject(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "autoscaling-keda.yaml"))
	require.NoError(t, err)
	j, err := sigsyaml.YAMLToJSON(raw)
	require.NoError(t, err)
	var so map[string]any
	require.NoError(t, json.Unmarshal(j, &so))
	return so
}

func kedaSchema(t *testing.T) *crdSchema {
	t.Helper()
	raw, err := os.ReadFile("testdata/keda.sh_scaledobjects.yaml")
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema *crdSchema `json:"openAPIV3Schema"`
				}
			}
		}
	}
	require.NoError(t, sigsyaml.Unmarshal(raw, &crd))
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatal("the CRD has no v1alpha1")
	return nil
}

// The autoscalers are valid for their APIs (the HPA against the Kubernetes
// types, the ScaledObject against KEDA's CRD schema and its Prometheus
// scaler's keys, the adapter rule against the adapter's config), scale the
// Deployment of kubernetes.yaml, stop at the same shard count, and select
// the lag of the pipeline the Deployment runs.
func TestDeployAutoscalers(t *testing.T) {
	t.Parallel()
	so := scaledObject(t)
	assert.Equal(t, "keda.sh/v1alpha1", so["apiVersion"])
	assert.Equal(t, "ScaledObject", so["kind"])
	schema := kedaSchema(t)
	assert.Empty(t, validateCustomResource(t, schema, so), "autoscaling-keda.yaml against KEDA's ScaledObject schema")
	broken := scaledObject(t)
	dig(broken, "spec").(map[string]any)["maxReplicas"] = 4.0
	assert.Contains(t, validateCustomResource(t, schema, broken), "ScaledObject.spec.maxReplicas: unknown field", "the schema check catches a field KEDA does not have")

	hpa := k8sObjects(t, "autoscaling-hpa.yaml")["HorizontalPodAutoscaler/connect-kinesis"].(*autoscalingv2.HorizontalPodAutoscaler)
	require.NotNil(t, hpa)
	deployment := k8sObjects(t, "kubernetes.yaml")["Deployment/connect-kinesis"].(*appsv1.Deployment)
	assert.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment.Name}, hpa.Spec.ScaleTargetRef)
	assert.Equal(t, deployment.Name, dig(so, "spec", "scaleTargetRef", "name"))

	// Both stop at the shard count (the stream of the pipeline has 4).
	assert.Equal(t, float64(hpa.Spec.MaxReplicas), dig(so, "spec", "maxReplicaCount"))
	assert.Equal(t, float64(*hpa.Spec.MinReplicas), dig(so, "spec", "minReplicaCount"))
	assert.GreaterOrEqual(t, *hpa.Spec.MinReplicas, int32(1), "never 0: without a copy nothing reports the lag")

	trigger := dig(so, "spec", "triggers", 0).(map[string]any)
	assert.Equal(t, "prometheus", trigger["type"])
	assert.Equal(t, "AverageValue", trigger["metricType"])
	for key := range trigger["metadata"].(map[string]any) {
		assert.Contains(t, kedaPrometheusMetadata, key, "a metadata key KEDA's Prometheus scaler reads")
	}
	query := dig(trigger, "metadata", "query").(string)

	// The pipeline's stream and label select the lag in both.
	var pipeline struct {
		Input struct {
			Label   string
			Kinesis struct{ Streams []string }
		}
	}
	require.NoError(t, sigsyaml.Unmarshal([]byte(objs(t)["ConfigMap/connect-kinesis"].(*corev1.ConfigMap).Data["pipeline.yaml"]), &pipeline))
	require.NotEmpty(t, pipeline.Input.Label)
	assert.Contains(t, query, `label="`+pipeline.Input.Label+`"`)
	assert.Contains(t, query, `stream="orders"`, "the stream of ${KINESIS_STREAM:orders}")
	require.Len(t, hpa.Spec.Metrics, 1)
	ext := hpa.Spec.Metrics[0].External
	require.NotNil(t, ext)
	assert.Equal(t, map[string]string{"stream": "orders", "label": pipeline.Input.Label}, ext.Metric.Selector.MatchLabels)
	assert.Equal(t, autoscalingv2.AverageValueMetricType, ext.Target.Type)
	threshold, err := strconv.ParseInt(dig(trigger, "metadata", "threshold").(string), 10, 64)
	require.NoError(t, err)
	assert.Equal(t, threshold, ext.Target.AverageValue.Value(), "one target lag in both")

	raw, err := os.ReadFile(filepath.Join(deployDir, "prometheus-adapter.yaml"))
	require.NoError(t, err)
	var adapter adapterConfig
	require.NoError(t, sigsyaml.UnmarshalStrict(raw, &adapter), "prometheus-adapter.yaml against the adapter's config fields")
	require.Len(t, adapter.ExternalRules, 1)
	assert.Equal(t, ext.Metric.Name, adapter.ExternalRules[0].Name.As, "the HPA's metric is the one the rule serves")
}

func objs(t *testing.T) map[string]any { return k8sObjects(t, "kubernetes.yaml") }

// validateCustomResource checks a custom resource as the API server does:
// metadata as an ObjectMeta (the CRD schema leaves it to the server), the
// rest against the CRD's schema.
func validateCustomResource(t *testing.T, schema *crdSchema, obj map[string]any) []string {
	t.Helper()
	rest := map[string]any{}
	for k, v := range obj {
		rest[k] = v
	}
	meta, err := json.Marshal(obj["metadata"])
	require.NoError(t, err)
	var om metav1.ObjectMeta
	dec := json.NewDecoder(strings.NewReader(string(meta)))
	dec.DisallowUnknownFields()
	var errs []string
	if err := dec.Decode(&om); err != nil {
		errs = append(errs, "metadata: "+err.Error())
	}
	delete(rest, "metadata")
	return append(errs, schema.validate(obj["kind"].(string), rest)...)
}
