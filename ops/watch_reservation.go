package ops

// ReservationWarning is a watched workload whose pods run on nodes of a reservation (a training plan) that ends
// soon: its thread is warned once, before the instances are taken back.
type ReservationWarning struct {
	Object ObjectRef `json:"object"`
	// Reservation is the training plan and instance group, its end and the time left when the watcher looked.
	Reservation CapacityReservation `json:"reservation"`
	// Nodes are the workload's nodes in that instance group, by name.
	Nodes []string `json:"nodes"`
}
