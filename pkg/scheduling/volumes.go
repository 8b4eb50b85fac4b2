package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// volumeRequirements derives the zone constraints a pod's volumes impose: a
// bound PV's node affinity, or for an unbound claim whose StorageClass waits
// for the first consumer, the class's allowed topologies. They constrain the
// NodeClaim only; they do not change how topology spread counts the pod.
// It also records, per CSI driver, how many volumes the pod attaches.
func (s *solver) volumeRequirements(c *podClass, pod *corev1.Pod) error {
	if s.vols == nil {
		s.vols = newVolumeIndex(s.in)
	}
	pvcs, pvs, scs := s.vols.pvcs, s.vols.pvs, s.vols.scs
	c.volumeReqs = Requirements{}
	if len(pod.Spec.Volumes) == 0 {
		return nil
	}
	for _, v := range pod.Spec.Volumes {
		var claimName string
		var scName *string
		switch {
		case v.PersistentVolumeClaim != nil:
			claimName = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
			claimName = pod.Name + "-" + v.Name
			scName = v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
		default:
			continue
		}
		pvc := pvcs[pod.Namespace+"/"+claimName]
		if pvc == nil && v.Ephemeral == nil {
			return refuse(PlacementError{Kind: RefusalVolume, Volume: claimName,
				Detail: fmt.Sprintf("persistentvolumeclaim %q not found", claimName)})
		}
		if pvc != nil {
			scName = pvc.Spec.StorageClassName
			if pvc.Spec.VolumeName != "" {
				pv := pvs[pvc.Spec.VolumeName]
				if pv == nil {
					return refuse(PlacementError{Kind: RefusalVolume, Volume: claimName,
						Detail: fmt.Sprintf("persistentvolume %q of claim %q not found", pvc.Spec.VolumeName, claimName)})
				}
				if pv.Spec.CSI != nil {
					c.addDriver(pv.Spec.CSI.Driver)
				}
				if err := addPVAffinity(c.volumeReqs, pv); err != nil {
					return refuse(PlacementError{Kind: RefusalVolume, Volume: claimName, Detail: err.Error()})
				}
				c.volumeSource(claimName)
				continue
			}
		}
		if scName == nil || *scName == "" {
			continue
		}
		sc := scs[*scName]
		if sc == nil {
			return refuse(PlacementError{Kind: RefusalVolume, Volume: claimName,
				Detail: fmt.Sprintf("storageclass %q not found", *scName)})
		}
		c.addDriver(sc.Provisioner)
		if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || len(sc.AllowedTopologies) == 0 {
			continue
		}
		for _, e := range sc.AllowedTopologies[0].MatchLabelExpressions {
			c.volumeReqs.Add(NewRequirement(e.Key, OpIn, e.Values...))
		}
		c.volumeSource(claimName)
	}
	return nil
}

// volumeIndex looks up claims, volumes and classes by name.
type volumeIndex struct {
	pvcs map[string]*corev1.PersistentVolumeClaim
	pvs  map[string]*corev1.PersistentVolume
	scs  map[string]*storagev1.StorageClass
}

func newVolumeIndex(in *Input) *volumeIndex {
	v := &volumeIndex{pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}, scs: map[string]*storagev1.StorageClass{}}
	for _, p := range in.PersistentVolumeClaims {
		v.pvcs[p.Namespace+"/"+p.Name] = p
	}
	for _, p := range in.PersistentVolumes {
		v.pvs[p.Name] = p
	}
	for _, sc := range in.StorageClasses {
		v.scs[sc.Name] = sc
	}
	return v
}

// drivers counts the CSI volumes of a pod that already runs, per driver,
// for attach limits; claims that cannot be resolved are skipped.
func (v *volumeIndex) drivers(pod *corev1.Pod) map[string]int {
	var out map[string]int
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		pvc := v.pvcs[pod.Namespace+"/"+vol.PersistentVolumeClaim.ClaimName]
		if pvc == nil {
			continue
		}
		d := ""
		if pv := v.pvs[pvc.Spec.VolumeName]; pv != nil && pv.Spec.CSI != nil {
			d = pv.Spec.CSI.Driver
		} else if pvc.Spec.StorageClassName != nil {
			if sc := v.scs[*pvc.Spec.StorageClassName]; sc != nil {
				d = sc.Provisioner
			}
		}
		if d != "" {
			if out == nil {
				out = map[string]int{}
			}
			out[d]++
		}
	}
	return out
}

func (c *podClass) addDriver(d string) {
	if c.volDrivers == nil {
		c.volDrivers = map[string]int{}
	}
	c.volDrivers[d]++
}

// addPVAffinity adds the first node-affinity term of a PV. Hostname terms are
// skipped: local volumes pin a node the new NodeClaim cannot be.
func addPVAffinity(r Requirements, pv *corev1.PersistentVolume) error {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || len(pv.Spec.NodeAffinity.Required.NodeSelectorTerms) == 0 {
		return nil
	}
	for _, e := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == LabelHostname {
			continue
		}
		req, err := ParseRequirement(e.Key, string(e.Operator), e.Values, 0)
		if err != nil {
			return fmt.Errorf("persistentvolume %q node affinity: %w", pv.Name, err)
		}
		r.Add(req)
	}
	return nil
}

// volumeLimitHit checks CSI attach limits on an existing node: the first
// driver whose limit the pod would pass, and that limit.
func (s *solver) volumeLimitHit(b *bin, c *podClass) (string, int) {
	if b.node == nil || len(b.node.VolumeLimits) == 0 {
		return "", 0
	}
	for _, d := range sortedKeys(c.volDrivers) {
		lim, ok := b.node.VolumeLimits[d]
		if !ok {
			continue
		}
		if b.volumes[d]+c.volDrivers[d] > lim {
			return d, lim
		}
	}
	return "", 0
}

// volumeSource remembers that the keys of c.volumeReqs not yet attributed
// come from claim, so that a conflict on them is reported as the volume's.
func (c *podClass) volumeSource(claim string) {
	for k := range c.volumeReqs {
		if _, ok := c.volumeFrom[k]; ok {
			continue
		}
		if c.volumeFrom == nil {
			c.volumeFrom = map[string]string{}
		}
		c.volumeFrom[k] = claim
	}
}

func (s *solver) addVolumes(b *bin, c *podClass) {
	for d, n := range c.volDrivers {
		b.volumes[d] += n
	}
}
