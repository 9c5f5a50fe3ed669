package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// EmulatorCerts are the test CA and the server certificate kinesis-mock
// serves on its TLS port.
type EmulatorCerts struct {
	*Certs
	// kinesisMockCert is the file kinesis-mock reads its certificate from
	// (KINESIS_MOCK_CERT_PATH: {"server":{"key","cert"}}).
	kinesisMockCert string
}

var (
	emulatorCAOnce sync.Once
	emulatorCA     *EmulatorCerts
	emulatorCAErr  error
)

// EmulatorCA returns the test CA that signs kinesis-mock's TLS
// certificate, made once and kept in the user's cache folder
// (connect-kinesis/emulator-ca). The certificate kinesis-mock ships names no
// host, so no client could verify it; with this one a client verifies the
// emulator like any server. The AWS SDK trusts it through its standard
// AWS_CA_BUNDLE=<CA file>, in a test process or a child process alike.
//
// The CA is kept so that emulators started one after another, in one
// process or several, all present the same one.
func EmulatorCA() (*EmulatorCerts, error) {
	emulatorCAOnce.Do(func() { emulatorCA, emulatorCAErr = loadEmulatorCA() })
	return emulatorCA, emulatorCAErr
}

func loadEmulatorCA() (*EmulatorCerts, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "connect-kinesis", "emulator-ca")
	ec := emulatorCertsIn(dir)
	if _, err := os.Stat(ec.kinesisMockCert); err == nil {
		return ec, nil
	}
	// Made aside and renamed into place: of two processes making it at
	// once, one rename wins and both use the winner's files.
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("making the emulator CA folder: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "emulator-ca-")
	if err != nil {
		return nil, fmt.Errorf("making the emulator CA folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	if _, err := GenerateCertsValidFor(tmp, emulatorCAValidity); err != nil {
		return nil, fmt.Errorf("generating the emulator CA: %w", err)
	}
	if err := writeKinesisMockCert(emulatorCertsIn(tmp)); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(ec.kinesisMockCert); statErr != nil {
			return nil, errors.Join(fmt.Errorf("placing the emulator CA in %s: %w", dir, err), statErr)
		}
	}
	return ec, nil
}

func emulatorCertsIn(dir string) *EmulatorCerts {
	return &EmulatorCerts{
		Certs: &Certs{
			CA:         filepath.Join(dir, "ca.crt"),
			ServerCert: filepath.Join(dir, "server.crt"),
			ServerKey:  filepath.Join(dir, "server.key"),
			ClientCert: filepath.Join(dir, "client.crt"),
			ClientKey:  filepath.Join(dir, "client.key"),
		},
		kinesisMockCert: filepath.Join(dir, "kinesis-mock.json"),
	}
}

func writeKinesisMockCert(ec *EmulatorCerts) error {
	cert, err := os.ReadFile(ec.ServerCert)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(ec.ServerKey)
	if err != nil {
		return err
	}
	doc, err := json.Marshal(map[string]map[string]string{"server": {"key": string(key), "cert": string(cert)}})
	if err != nil {
		return err
	}
	return os.WriteFile(ec.kinesisMockCert, doc, 0o600)
}
