import CLogbook
