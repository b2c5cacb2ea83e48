"""Run the real gpu-eks program offline, in-process, under mocks that answer like AWS would."""
