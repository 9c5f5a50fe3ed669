package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

const deployDir = "../../config/deploy"

// policyActions returns the actions of an IAM policy file by service prefix
// ("kinesis", "kms"), without the prefix.
func policyActions(t *testing.T, file, service string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, file))
	require.NoError(t, err)
	var policy struct {
		Version   string
		Statement []struct {
			Effect   string
			Action   []string
			Resource string
		}
	}
	require.NoError(t, json.Unmarshal(raw, &policy), "%s is a policy document", file)
	require.Equal(t, "2012-10-17", policy.Version)
	var out []string
	for _, s := range policy.Statement {
		require.Equal(t, "Allow", s.Effect)
		require.NotEmpty(t, s.Resource)
		for _, a := range s.Action {
			if name, ok := strings.CutPrefix(a, service+":"); ok {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestIntegrationIAMPolicyMatchesCalls runs the output (with aggregation,
// which reads the shard map) and the input (finding its stream by a
// pattern and a tag) through the fault proxy against
// kinesis-mock, and checks that the Kinesis operations each sent are exactly
// the Kinesis actions its documented policy allows: a call the policy lacks
// would be denied in production, an action it lists but nothing calls is
// more than needed.
func TestIntegrationIAMPolicyMatchesCalls(t *testing.T) {
	t.Parallel()
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t)
	const stream, n = "iam-policy", 200
	k.MustCreateStream(t, stream, 2)
	outProxy, err := faultproxy.Start(k.Endpoint, 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = outProxy.Close() })
	inProxy, err := faultproxy.Start(k.Endpoint, 2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inProxy.Close() })

	outConf := fmt.Sprintf(`http: { enabled: false }
input:
  generate: { count: %d, interval: "", mapping: 'root = {"n": counter()}' }
output:
  kinesis:
    stream: %s
    partition_key: '${! json("n") }'
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    aggregation: { enabled: true }
`, n, stream, testenv.Region, outProxy.URL, testenv.AccessKey, testenv.SecretKey)
	out, err := runConfig(t, outConf, 60*time.Second)
	require.NoError(t, err, "the output run:\n%s", out)

	lines := filepath.Join(t.TempDir(), "out.jsonl")
	// The input finds its stream by a pattern and a tag, as a group
	// following streams does: ListStreams and ListTagsForStream too.
	_, err = k.Client().AddTagsToStream(t.Context(), &kinesis.AddTagsToStreamInput{StreamName: aws.String(stream), Tags: map[string]string{"team": "iam"}})
	require.NoError(t, err)
	inConf := fileInputConfig(`"`+stream[:len(stream)-1]+`*"`, inProxy.URL, r.URL(), lines, "stream_tags: { team: iam }", "stream_discovery_interval: 5s")
	cmd := exec.Command(binary, "-c", writeFile(t, "in.yaml", inConf))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, testenv.StartCommand("connect-kinesis", cmd))
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { return len(readLines(t, lines)) >= n }, 90*time.Second, 200*time.Millisecond,
		"the input reads what the output wrote")

	assert.Equal(t, policyActions(t, "iam-policy-output.json", "kinesis"), outProxy.Operations(), "the output's calls are its policy's Kinesis actions")
	assert.Equal(t, policyActions(t, "iam-policy-input.json", "kinesis"), inProxy.Operations(), "the input's calls are its policy's Kinesis actions")
	// KMS is called by Kinesis on the caller's behalf for encrypted streams:
	// decrypting on read, generating data keys on write.
	assert.Equal(t, []string{"Decrypt"}, policyActions(t, "iam-policy-input.json", "kms"))
	assert.Equal(t, []string{"GenerateDataKey"}, policyActions(t, "iam-policy-output.json", "kms"))
}

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err, "%s document %d is YAML", path, len(docs)+1)
		docs = append(docs, doc)
	}
}

// dig follows keys (map keys or list indices as ints) through a decoded
// document.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// The Kubernetes manifests are valid YAML with the objects docs/deploy.md
// describes, wired to each other, and the pipeline they mount lints clean.
func TestDeployManifests(t *testing.T) {
	t.Parallel()
	docs := yamlDocs(t, filepath.Join(deployDir, "kubernetes.yaml"))
	byKind := map[string]map[string]any{}
	for _, d := range docs {
		for _, key := range []string{"apiVersion", "kind"} {
			require.NotEmpty(t, d[key], "every object has %s", key)
		}
		name, _ := dig(d, "metadata", "name").(string)
		require.NotEmpty(t, name, "every object has metadata.name")
		byKind[d["kind"].(string)+"/"+name] = d
	}
	for _, want := range []string{"ServiceAccount/connect-kinesis", "Secret/connect-kinesis", "ConfigMap/connect-kinesis",
		"Deployment/connect-kinesis", "Deployment/connect-kinesis-redis", "Service/connect-kinesis-redis"} {
		require.Contains(t, byKind, want)
	}

	for _, name := range []string{"connect-kinesis", "connect-kinesis-redis"} {
		d := byKind["Deployment/"+name]
		assert.Equal(t, dig(d, "spec", "selector", "matchLabels"), dig(d, "spec", "template", "metadata", "labels"), "%s selects its pods", name)
	}
	svc := byKind["Service/connect-kinesis-redis"]
	assert.Equal(t, dig(svc, "spec", "selector"), dig(byKind["Deployment/connect-kinesis-redis"], "spec", "template", "metadata", "labels"))
	assert.Contains(t, dig(byKind["Secret/connect-kinesis"], "stringData", "REDIS_URL"), "connect-kinesis-redis:6379", "the URL names the Redis Service")

	app := byKind["Deployment/connect-kinesis"]
	pod := dig(app, "spec", "template", "spec")
	env := map[string]any{}
	for _, e := range dig(pod, "containers", 0, "env").([]any) {
		env[dig(e, "name").(string)] = e
	}
	assert.Equal(t, "metadata.name", dig(env["INSTANCE_ID"], "valueFrom", "fieldRef", "fieldPath"), "the pod name is the instance id")
	assert.Equal(t, "connect-kinesis", dig(env["REDIS_URL"], "valueFrom", "secretKeyRef", "name"))
	assert.Equal(t, "connect-kinesis", dig(pod, "serviceAccountName"))
	assert.Equal(t, "connect-kinesis", dig(pod, "volumes", 0, "configMap", "name"))

	// The mounted pipeline is config/deploy/pipeline.yaml, and it lints.
	pipeline := dig(byKind["ConfigMap/connect-kinesis"], "data", "pipeline.yaml").(string)
	file, err := os.ReadFile(filepath.Join(deployDir, "pipeline.yaml"))
	require.NoError(t, err)
	assert.Equal(t, string(file), pipeline, "the ConfigMap holds pipeline.yaml verbatim")
	out, err := exec.CommandContext(t.Context(), binary, "lint", filepath.Join(deployDir, "pipeline.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", out)

	// The grace period outlasts the pipeline's shutdown_timeout, which
	// outlasts the lease hand-off, so a stopping pod commits and releases.
	var conf struct {
		ShutdownTimeout string `yaml:"shutdown_timeout"`
		Input           struct {
			Kinesis struct {
				Lease struct {
					HandoffTimeout string `yaml:"handoff_timeout"`
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(file, &conf))
	shutdown, err := time.ParseDuration(conf.ShutdownTimeout)
	require.NoError(t, err)
	handoff, err := time.ParseDuration(conf.Input.Kinesis.Lease.HandoffTimeout)
	require.NoError(t, err)
	grace := time.Duration(dig(pod, "terminationGracePeriodSeconds").(int)) * time.Second
	assert.Less(t, handoff, shutdown)
	assert.Less(t, shutdown, grace)

	unit, err := os.ReadFile(filepath.Join(deployDir, "connect-kinesis.service"))
	require.NoError(t, err)
	assert.Contains(t, string(unit), "TimeoutStopSec=45", "systemd waits as long as Kubernetes does")
	assert.Contains(t, string(unit), "ExecStart=/usr/local/bin/connect-kinesis run /etc/connect-kinesis/pipeline.yaml")
}
