package awslocal

// SetFleetAdmitted has h called by each CreateFleet once it holds its
// launch slot, before it launches (nil removes it).
func (l *Local) SetFleetAdmitted(h func()) {
	l.front.ec2.launchMu.Lock()
	defer l.front.ec2.launchMu.Unlock()
	l.front.ec2.admitted = h
}
