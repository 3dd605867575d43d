"""Reports: results files, plots, Allure attachments, regression reports."""
