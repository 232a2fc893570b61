package local

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNginxConfigGetsThePodsLoopbackPortsAndDirectories(t *testing.T) {
	c := ProgramContainer{
		Ports:  map[int32]int{8000: 40000, 8001: 40001, 8002: 40002},
		Mounts: map[string]string{"/tmp": "/pods/gw/volumes/tmp", "/tmp/plx/archives": "/pods/gw/volumes/archives", "/etc/ssl/polyaxon": "/pods/gw/volumes/ssl"},
	}
	in := `pid /tmp/nginx.pid;
http {
    client_body_temp_path /tmp/nginx-client-body;
    upstream polyaxon_api {
        server 127.0.0.1:8001;
    }
    map $request_uri $refused {
        "~^[^?]*//" 1;
    }
    server {
        listen 8000 ssl;
        ssl_certificate /etc/ssl/polyaxon/tls.crt;
        location /streams/ {
            proxy_pass http://$up;
        }
        location /tmp/plx/archives/ {
            alias /tmp/plx/archives/;
        }
    }
}
`
	out, err := rewriteNginxConfig(in, c)
	require.NoError(t, err)
	assert.Equal(t, `pid /pods/gw/volumes/tmp/nginx.pid;
http {
    client_body_temp_path /pods/gw/volumes/tmp/nginx-client-body;
    upstream polyaxon_api {
        server 127.0.0.1:40001;
    }
    map $request_uri $refused {
        "~^[^?]*//" 1;
    }
    server {
        listen 127.0.0.1:40000 ssl;
        ssl_certificate /pods/gw/volumes/ssl/tls.crt;
        location /streams/ {
            proxy_pass http://$up;
        }
        location /tmp/plx/archives/ {
            alias /pods/gw/volumes/archives/;
        }
        location /pods/gw/volumes/archives/ {
            alias /pods/gw/volumes/archives/;
        }
    }
}
`, out, "an internal alias keeps the container's URI, and gets a twin under the path streams names here")

	_, err = rewriteNginxConfig("server 127.0.0.1:9999;", c)
	assert.ErrorContains(t, err, "ports 9999 are no container port of the pod", "an upstream the pod does not declare")
}
