"""What pages show: the page view-models (a typed object per page with many parts, loaded from the services:
lab_page, report_page, review_page) and pure functions that turn lesson content and lab results into what a
template renders (lesson_pages, result_view, result_excerpt)."""
