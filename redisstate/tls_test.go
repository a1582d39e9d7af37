package redisstate_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/internal/verbtest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRediss: rediss:// speaks TLS, as redis-cli --tls does. A server that
// listens for TLS only on a port of its own (its plain port is the one the
// harness pings) serves every verb over rediss://; a certificate the
// client cannot verify fails Open with ErrUnavailable naming the cause,
// unless the URL says skip_verify=true; redis:// to the TLS port fails.
func TestRediss(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	port, err := redistest.FreePort()
	require.NoError(t, err)
	redistest.Start(t, redistest.WithArgs("--tls-port", fmt.Sprint(port), "--tls-cert-file", cert,
		"--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no"))
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))

	db, err := state.Open("rediss://" + addr + "/0?prefix=tls:&skip_verify=true")
	require.NoError(t, err)
	defer db.Close()
	ctx := ctxT(t)
	n, err := db.Incr(ctx, "hits", state.TTL(time.Minute))
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	l, err := db.Lease(ctx, "job", "w", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1, l.Token)
	v, err := db.Get(ctx, "hits")
	require.NoError(t, err)
	assert.Equal(t, "1", v.String())

	_, err = state.Open("rediss://" + addr + "/0?prefix=tls:")
	require.Error(t, err, "a self-signed certificate is not trusted without skip_verify")
	assert.ErrorIs(t, err, state.ErrUnavailable)
	assert.Contains(t, err.Error(), "certificate")
	assert.Contains(t, err.Error(), addr)

	_, err = state.Open("redis://" + addr + "/0?prefix=tls:&dial_timeout=2s&read_timeout=2s")
	require.Error(t, err, "plain text to the TLS port")
	assert.ErrorIs(t, err, state.ErrUnavailable)
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir, PEM-encoded, and returns their paths.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(priv)
	require.NoError(t, err)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return cert, key
}

// TestVerbTableOverTLS runs the whole verb table over rediss://, so that
// every verb, not a few, is known to work over TLS: its connections are the
// ones the store does not look at before a write, and an Update's or a
// Scan's run on a connection of their own.
func TestVerbTableOverTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	port, err := redistest.FreePort()
	require.NoError(t, err)
	redistest.Start(t, redistest.WithArgs("--tls-port", fmt.Sprint(port), "--tls-cert-file", cert,
		"--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no"))
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	var n atomic.Int64
	verbtest.Run(t, func(t *testing.T) *state.DB {
		prefix := fmt.Sprintf("verbtable:%d:", n.Add(1))
		db, err := state.Open("rediss://" + addr + "/0?skip_verify=true&prefix=" + prefix)
		require.NoError(t, err, "open %s", prefix)
		return db
	}, verbtest.Options{})
}
