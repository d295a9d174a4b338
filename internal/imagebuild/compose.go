package imagebuild

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// builtImage is a built image as go-containerregistry sees it: the
// manifest and config this package wrote, the new layers from the build
// cache, and the base image's layers by descriptor only (their content is
// already unpacked in the store, and is never read).
type builtImage struct {
	manifest []byte
	config   []byte
	mt       types.MediaType
	layers   map[v1.Hash]partial.CompressedLayer
}

var _ partial.CompressedImageCore = (*builtImage)(nil)

func (b *builtImage) RawConfigFile() ([]byte, error)      { return b.config, nil }
func (b *builtImage) MediaType() (types.MediaType, error) { return b.mt, nil }
func (b *builtImage) RawManifest() ([]byte, error)        { return b.manifest, nil }
func (b *builtImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := b.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("layer %s: not in this image", h)
}

// cacheLayer is a step's layer.tar: uncompressed, so its digest is its
// diff ID.
type cacheLayer struct {
	path string
	hash v1.Hash
	size int64
	mt   types.MediaType
}

func (l *cacheLayer) Digest() (v1.Hash, error)            { return l.hash, nil }
func (l *cacheLayer) DiffID() (v1.Hash, error)            { return l.hash, nil }
func (l *cacheLayer) Size() (int64, error)                { return l.size, nil }
func (l *cacheLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
func (l *cacheLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }
func (l *cacheLayer) Uncompressed() (io.ReadCloser, error) {
	return os.Open(l.path)
}

// baseLayer is a layer of the base image, named but not readable.
type baseLayer struct{ d v1.Descriptor }

func (l *baseLayer) Digest() (v1.Hash, error)            { return l.d.Digest, nil }
func (l *baseLayer) Size() (int64, error)                { return l.d.Size, nil }
func (l *baseLayer) MediaType() (types.MediaType, error) { return l.d.MediaType, nil }
func (l *baseLayer) Compressed() (io.ReadCloser, error) {
	return nil, fmt.Errorf("layer %s of the base image: its content is in the image store only as unpacked", l.d.Digest)
}

// compose makes the image of a built stage: the base's manifest and
// config with the stage's layers, history and config. Nothing in it
// depends on when it was built: the same steps give the same digest.
func (b *builder) compose(s *stageState) (v1.Image, error) {
	var m v1.Manifest
	var cf v1.ConfigFile
	if s.baseManifest != nil {
		m = *s.baseManifest
		m.Layers = append([]v1.Descriptor(nil), m.Layers...)
		cf = *s.baseConfig.DeepCopy()
	} else {
		m = v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: v1.Descriptor{MediaType: types.OCIConfigJSON}}
		cf = v1.ConfigFile{Architecture: runtime.GOARCH, OS: "linux", RootFS: v1.RootFS{Type: "layers"},
			Created: v1.Time{Time: time.Unix(0, 0).UTC()}}
	}
	layerType := types.OCIUncompressedLayer
	if m.MediaType == types.DockerManifestSchema2 {
		layerType = types.DockerUncompressedLayer
	}
	img := &builtImage{mt: m.MediaType, layers: map[v1.Hash]partial.CompressedLayer{}}
	for _, d := range m.Layers {
		img.layers[d.Digest] = &baseLayer{d: d}
	}
	for _, st := range s.layers {
		h, err := v1.NewHash(st.meta.DiffID)
		if err != nil {
			return nil, fmt.Errorf("build cache entry %s: %w", st.dir, err)
		}
		img.layers[h] = &cacheLayer{path: st.layerTar(), hash: h, size: st.meta.Size, mt: layerType}
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: layerType, Size: st.meta.Size, Digest: h})
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, h)
	}
	cf.Config = s.cfg
	if s.author != "" {
		cf.Author = s.author
	}
	cf.History = append(cf.History, s.history...)
	cf.Container, cf.DockerVersion = "", ""
	var err error
	if img.config, err = json.Marshal(&cf); err != nil {
		return nil, err
	}
	ch, size, err := v1.SHA256(bytes.NewReader(img.config))
	if err != nil {
		return nil, err
	}
	m.Config.Digest, m.Config.Size = ch, size
	if img.manifest, err = json.Marshal(&m); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(img)
}
