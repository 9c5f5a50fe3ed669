package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// imageConfig is the part of an image's OCI config the test runs by.
type imageConfig struct {
	User       string
	Env        []string
	Entrypoint []string
	Cmd        []string
	Labels     map[string]string
}

// containerTool is podman or buildah, whichever `make image` built with.
type containerTool struct{ path, name string }

func (c containerTool) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), c.path, args...).Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "%s %s: %s", c.name, strings.Join(args, " "), stderr)
	return strings.TrimSpace(string(out))
}

func (c containerTool) inspect(t *testing.T, image string) imageConfig {
	t.Helper()
	var raw string
	if c.name == "buildah" {
		raw = c.run(t, "inspect", "--type", "image", "--format", "{{json .OCIv1.Config}}", image)
	} else {
		raw = c.run(t, "image", "inspect", "--format", "{{json .Config}}", image)
	}
	var cfg imageConfig
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg), "%s", raw)
	return cfg
}

// rootFS copies the image's files into a directory of the test: the
// image's own mount is read-only, and a container runtime would lay the
// user's config mount over a writable layer too.
func (c containerTool) rootFS(t *testing.T, image string) string {
	t.Helper()
	var mnt string
	if c.name == "buildah" {
		ctr := c.run(t, "from", "--pull=never", image)
		t.Cleanup(func() { _ = exec.Command(c.path, "rm", ctr).Run() })
		mnt = c.run(t, "mount", ctr)
	} else {
		mnt = c.run(t, "image", "mount", image)
		t.Cleanup(func() { _ = exec.Command(c.path, "image", "unmount", image).Run() })
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	out, err := exec.Command("cp", "-a", mnt, root).CombinedOutput()
	require.NoError(t, err, "copying the image's files: %s", out)
	return root
}

// startImage runs the image's entrypoint and command with pipeline mounted
// read-only at /etc/connect-kinesis/pipeline.yaml, on the host's network.
// It uses `podman run` where podman can start containers. Where it cannot
// (on VMs whose sandbox refuses setrlimit or cgroups, like the one this was
// written on), it runs the image's files as they are: a copy of its root
// filesystem, the config bind-mounted in a private mount namespace as a
// volume would be, and chroot into it as the image's user with the image's
// environment only. What runs is the image's binary, CA bundle, passwd and
// user; what is not exercised is the runtime's isolation.
func startImage(t *testing.T, tool containerTool, image string, cfg imageConfig, pipeline string, stdout, stderr *syncBuffer) (*runningImage, string) {
	t.Helper()
	const target = "/etc/connect-kinesis/pipeline.yaml"
	if tool.name == "podman" {
		probe, err := exec.CommandContext(t.Context(), tool.path, "run", "--rm", "--cgroups=disabled", "--network=host", image, "--version").CombinedOutput()
		if err == nil {
			name := fmt.Sprintf("connect-kinesis-test-%d", time.Now().UnixNano())
			cmd := exec.Command(tool.path, "run", "--rm", "--name", name, "--cgroups=disabled", "--network=host",
				"-v", pipeline+":"+target+":ro", image)
			cmd.Stdout, cmd.Stderr = stdout, stderr
			require.NoError(t, testenv.StartCommand("podman run", cmd))
			r := watch(cmd)
			t.Cleanup(func() { _ = exec.Command(tool.path, "rm", "-f", name).Run(); <-r.done })
			return r, "podman run"
		}
		t.Logf("podman cannot start containers here (%s); running the image's root filesystem with chroot", bytes.TrimSpace(probe))
	}
	if os.Geteuid() != 0 {
		testenv.Require(t, "root, to chroot into the image's files", fmt.Errorf("%w: podman run failed and chroot needs root", testenv.ErrNotInstalled))
	}
	root := tool.rootFS(t, image)
	require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(target)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, target), nil, 0o644))
	unshare, err := exec.LookPath("unshare")
	require.NoError(t, err)
	chroot, err := exec.LookPath("chroot")
	require.NoError(t, err)
	// unshare and chroot exec, so the PID is connect-kinesis' own.
	script := `mount --bind -o ro "$1" "$2` + target + `" && exec "$3" --userspec="$4" "$2" "${@:5}"`
	args := append([]string{"--mount", "--propagation", "private", "--", "bash", "-c", script, "bash",
		pipeline, root, chroot, cfg.User}, append(cfg.Entrypoint, cfg.Cmd...)...)
	cmd := exec.Command(unshare, args...)
	cmd.Env = cfg.Env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	require.NoError(t, testenv.StartCommand("image chroot", cmd))
	r := watch(cmd)
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-r.done })
	return r, "chroot"
}

// runningImage is a started image; done closes when it exited, with err.
type runningImage struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func watch(cmd *exec.Cmd) *runningImage {
	r := &runningImage{cmd: cmd, done: make(chan struct{})}
	go func() { r.err = cmd.Wait(); close(r.done) }()
	return r
}

func (r *runningImage) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestIntegrationImage runs the image `make image` built (named in
// CONNECT_KINESIS_IMAGE by `make test-image`) as a user would: the pipeline
// mounted at the path the image's command reads, records read from the
// emulator, checkpoints in Redis, the health endpoints the Kubernetes probes
// use answering, and a SIGTERM stopping it cleanly.
func TestIntegrationImage(t *testing.T) {
	image := os.Getenv("CONNECT_KINESIS_IMAGE")
	if image == "" {
		t.Skip("no image under test: `make test-image` builds one and names it in CONNECT_KINESIS_IMAGE")
	}
	t.Parallel()
	name := os.Getenv("CONNECT_KINESIS_CONTAINER")
	if name == "" {
		name = "podman"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		testenv.Require(t, name, fmt.Errorf("%w: %v", testenv.ErrNotInstalled, err))
	}
	tool := containerTool{path: path, name: filepath.Base(name)}

	cfg := tool.inspect(t, image)
	assert.Equal(t, []string{"/connect-kinesis"}, cfg.Entrypoint)
	assert.Equal(t, []string{"run", "/etc/connect-kinesis/pipeline.yaml"}, cfg.Cmd)
	assert.Equal(t, "65532:65532", cfg.User, "the image runs as a non-root user")
	assert.Equal(t, wantVersion, cfg.Labels["org.opencontainers.image.version"])
	assert.Regexp(t, `^[0-9a-f]{40}$`, cfg.Labels["org.opencontainers.image.revision"])
	assert.Equal(t, wantDate, cfg.Labels["org.opencontainers.image.created"])
	assert.NotEmpty(t, cfg.Labels["org.opencontainers.image.source"])

	// The image holds exactly the binary, the CA bundle and the user
	// database: no shell, no libc, nothing else.
	root := tool.rootFS(t, image)
	var files []string
	require.NoError(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return err
	}))
	slices.Sort(files)
	assert.Equal(t, []string{"connect-kinesis", "etc/group", "etc/passwd", "etc/ssl/certs/ca-certificates.crt"}, files)
	requireStaticELF(t, filepath.Join(root, "connect-kinesis"), hostMachine(t))
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	require.NoError(t, err)
	assert.Contains(t, string(passwd), ":65532:65532:", "the image's user is in its passwd")

	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t)
	const stream, n = "image-run", 100
	arn := k.MustCreateStream(t, stream, 2)
	putKeyed(t, k.Client(), stream, n)
	port, err := testenv.FreePort()
	require.NoError(t, err)
	// What a user would mount: a pipeline reading the stream to stdout,
	// readable by the image's user (not by root only).
	pipeline := filepath.Join(t.TempDir(), "pipeline.yaml")
	require.NoError(t, os.WriteFile(pipeline, []byte(fmt.Sprintf(`http: { address: 127.0.0.1:%d }
input:
  kinesis:
    streams: [ %s ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint: { redis: { url: '%s' }, group: image, commit_period: 200ms }
output:
  stdout: { codec: lines }
shutdown_timeout: 20s
`, port, stream, testenv.Region, k.Endpoint, testenv.AccessKey, testenv.SecretKey, r.URL())), 0o644))

	var stdout, stderr syncBuffer
	img, how := startImage(t, tool, image, cfg, pipeline, &stdout, &stderr)
	t.Logf("running the image with %s", how)
	records := func() int {
		return strings.Count(stdout.String(), `"k":`)
	}
	deadline := time.Now().Add(90 * time.Second)
	for records() < n && !img.exited() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	require.False(t, img.exited(), "the image exited (%v); log:\n%s", img.err, stderr.String())
	require.Equal(t, n, records(), "the image delivers the stream's records, each once; log:\n%s", stderr.String())

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, p := range []string{"/ping", "/ready"} {
		resp, err := http.Get(base + p)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s answers for the Kubernetes probes", p)
	}
	if how == "chroot" {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", img.cmd.Process.Pid))
		require.NoError(t, err)
		assert.Contains(t, string(status), "Uid:\t65532\t65532", "connect-kinesis runs as the image's user")
	}

	// The checkpoints of both shards are in Redis: a restart resumes there.
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	keys := checkpointer.NewFromClient(rc, checkpointer.Config{Group: "image", KeyPrefix: checkpointer.DefaultKeyPrefix}, nil, nil).Stream(arn).Keys()
	assert.Eventually(t, func() bool {
		ckpts, err := rc.HGetAll(t.Context(), keys.Checkpoints).Result()
		return err == nil && len(ckpts) >= 2
	}, 30*time.Second, 100*time.Millisecond, "both shards' checkpoints are committed to Redis")

	require.NoError(t, img.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-img.done:
		assert.NoError(t, img.err, "a SIGTERM stops it cleanly; log:\n%s", stderr.String())
	case <-time.After(40 * time.Second):
		t.Fatalf("the image did not stop within 40s of SIGTERM; log:\n%s", stderr.String())
	}
}
