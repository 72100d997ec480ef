//! The CustomResourceDefinitions of the four Volcano kinds (filled in below).
