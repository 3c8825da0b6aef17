"""The system under test: analyzer, knowledge database, embedding providers, fusion, reranker and service."""
