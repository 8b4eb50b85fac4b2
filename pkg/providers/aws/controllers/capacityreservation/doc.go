// Package capacityreservation holds the controllers that follow
// Karpenter's nodes through the life of their capacity reservations:
// capacitytype relabels nodes whose reservation ended as on-demand, and
// expiration drains nodes of capacity blocks before EC2 reclaims them.
package capacityreservation
